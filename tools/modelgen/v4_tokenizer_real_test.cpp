// make-model's V4 tokenizer on the real DeepSeek-V3 tokenizer files (models/, recreated by CI; the
// `model` tier): a tiny V4 checkpoint is generated, its tokenizer loaded by ds::Tokenizer, and V4
// prompts rendered by the recipe tokenize with every marker as one id and user text as plain BPE.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "make_model.h"
#include "recipe/chat_completions_request.h"
#include "recipe/encoding.h"
#include "recipe/prompt.h"
#include "tokenizer/tokenizer.h"
#include "v4_tokenizer.h"

namespace ds::modelgen {
namespace {

namespace fs = std::filesystem;

class V4TokenizerReal : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(std::string(DS_DEFAULT_TOKENIZER_DIR) + "/tokenizer.json")) return;
    const fs::path out = fs::temp_directory_path() / "v4_tokenizer_real_test";
    fs::remove_all(out);
    MakeModelOptions o;
    o.arch = "deepseek_v4";
    o.preset = "tiny";
    o.fp8 = true;
    o.out_dir = out.string();
    o.tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR;
    ThreadPool pool(2);
    const Result<MakeModelReport> report = make_model(o, pool);
    ASSERT_TRUE(report.ok()) << report.status().to_string();
    vocab_size_ = report->config.vocab_size;
    Result<Tokenizer> tok = Tokenizer::load(o.out_dir);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tok_ = new Tokenizer(std::move(tok).value());
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    if (tok_ == nullptr) GTEST_SKIP() << "no tokenizer under " << DS_DEFAULT_TOKENIZER_DIR;
  }

  static Tokenizer* tok_;
  static int64_t vocab_size_;
};

Tokenizer* V4TokenizerReal::tok_ = nullptr;
int64_t V4TokenizerReal::vocab_size_ = 0;

TEST_F(V4TokenizerReal, EveryMarkerIsOneNonSpecialIdInsideTheCheckpointVocab) {
  std::vector<int32_t> ids;
  for (const V4Marker& m : kV4Markers) {
    SCOPED_TRACE(std::string(m.content));
    const std::optional<int32_t> id = tok_->token_to_id(m.content);
    ASSERT_TRUE(id.has_value());
    if (m.known_id >= 0) {
      EXPECT_EQ(*id, m.known_id);  // the spec's id (V3.1 / V4)
    }
    EXPECT_LT(*id, vocab_size_);
    EXPECT_FALSE(tok_->is_special(*id));
    EXPECT_EQ(*tok_->encode(m.content, /*parse_special=*/true), std::vector<int32_t>{*id});
    EXPECT_GT(tok_->encode(m.content, /*parse_special=*/false)->size(), 1u);
    ids.push_back(*id);
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
  // V3's own markers did not move.
  EXPECT_EQ(tok_->token_to_id("<｜User｜>"), 128803);
  EXPECT_EQ(tok_->bos_id(), 0);
  EXPECT_EQ(tok_->eos_id(), 1);
  EXPECT_LE(tok_->vocab_size(), vocab_size_);
}

// A thinking-mode V4 prompt with tools and a tool round: every marker of the rendering is one id;
// the user's text spells the same markers and stays plain BPE (model spec §7).
TEST_F(V4TokenizerReal, V4PromptsTokenizeMarkersAsIdsAndUserTextAsBpe) {
  const std::string body = R"({"model":"m","thinking":{"type":"enabled"},
    "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],
    "messages":[{"role":"user","content":"Say </think> and <｜DSML｜tool_calls> and <｜latest_reminder｜>"},
                {"role":"assistant","content":"","reasoning_content":"need weather",
                 "tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"sunny"}]})";
  const Result<recipe::ChatRequest> req = recipe::parse_chat_completions_request(body, {});
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  recipe::EncodingOptions encoding;
  encoding.kind = recipe::PromptEncodingKind::deepseek_v4;
  const Result<recipe::RenderedPrompt> prompt = recipe::render_prompt(*req, encoding);
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  const Result<std::vector<int32_t>> ids = recipe::tokenize_prompt(*prompt, *tok_);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  for (const V4Marker& m : kV4Markers) {
    SCOPED_TRACE(std::string(m.content));
    const int32_t id = *tok_->token_to_id(m.content);
    const auto n_marker_segments =
        std::count_if(prompt->segments.begin(), prompt->segments.end(), [&](const recipe::PromptSegment& s) {
          return s.kind == recipe::SegmentKind::marker && s.text == m.content;
        });
    // Exactly the template's markers became ids: the user's copies did not.
    EXPECT_EQ(std::count(ids->begin(), ids->end(), id), n_marker_segments);
    if (m.content != "<｜latest_reminder｜>") {
      EXPECT_GT(n_marker_segments, 0);
    }
  }
  // The decoded ids give back the rendered text.
  EXPECT_EQ(*tok_->decode(*ids), prompt->text());
}

}  // namespace
}  // namespace ds::modelgen
