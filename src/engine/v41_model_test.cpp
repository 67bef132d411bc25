// DeepSeek-V4.1 forward on the generated tiny checkpoint (make-model --arch deepseek_v41 --preset
// tiny, Engram on layers 1 and 2): loaded as applications load it (engine/model_loader.h builds
// the Engram token map from the checkpoint's tokenizer); batch invariance (readers and pool layers
// take their source's state per sequence, Engram its history per sequence, in chunks), block-table
// independence, Engram's load errors naming the key, and the replay margin Engram adds.
// Agreement with the float64 reference: tests/reference (ctest reference_logits_v41_tiny).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/model_loader.h"
#include "model/model_registry.h"
#include "model/v4_test_support.h"
#include "modelgen/make_model.h"

namespace ds {
namespace {

class TinyV41Dir {
 public:
  TinyV41Dir() : dir_(::testing::TempDir() + "/ds_v41_model_test_" + std::to_string(::getpid())) {
    modelgen::MakeModelOptions o;
    o.arch = "deepseek_v41";
    o.preset = "tiny";
    o.fp8 = true;
    o.out_dir = dir_;
    o.tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR;
    ThreadPool pool(2);
    Result<modelgen::MakeModelReport> r = modelgen::make_model(o, pool);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
  ~TinyV41Dir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

const std::string& tiny_v41() {
  static const TinyV41Dir d;
  return d.path();
}

std::unique_ptr<ModelRunner> load_v41() {
  ModelOptions o;
  o.isa = best_isa();  // batch invariance holds on every path; the vector one keeps the test short
  o.n_threads = 2;
  o.max_seq_len = 128;
  Result<std::unique_ptr<ModelRunner>> m = load_model(tiny_v41(), o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  KvCacheConfig kc = standalone_kv_cache_config(128, 16);
  kc.n_blocks *= 4;
  kc.n_sequence_slots = 4;
  EXPECT_TRUE((*m)->init_kv_cache(kc).ok());
  return std::move(*m);
}

std::vector<float> run_alone(ModelRunner& m, const std::vector<int32_t>& ids, int slot,
                             bool reversed = false) {
  SequenceState seq;
  for (int b = 0; b < 8; ++b) seq.block_table.push_back(slot * 8 + (reversed ? 7 - b : b));
  seq.state_slot = slot;
  LogitsOutput out;
  ForwardRequest req{&seq, {ids.data(), ids.size()}, true};
  EXPECT_TRUE(m.forward({&req, 1}, out).ok());
  return std::vector<float>(out.logits.data(), out.logits.data() + out.logits.numel());
}

// A copy of the tiny checkpoint whose config.json text_config gets `edit`.
class EditedCopy {
 public:
  EditedCopy(const std::string& name, const std::function<void(nlohmann::json&)>& edit)
      : dir_(std::filesystem::path(::testing::TempDir()) / (name + std::to_string(::getpid()))) {
    namespace fs = std::filesystem;
    fs::create_directories(dir_);
    for (const auto& e : fs::directory_iterator(tiny_v41())) fs::copy(e.path(), dir_ / e.path().filename());
    std::ifstream in(dir_ / "config.json");
    nlohmann::json cfg = nlohmann::json::parse(in);
    in.close();
    edit(cfg["text_config"]);
    std::ofstream(dir_ / "config.json") << cfg.dump(2);
  }
  ~EditedCopy() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::string path() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

TEST(V41Model, BatchOfSequencesEqualsEachAlone) {
  auto m = load_v41();
  ASSERT_TRUE(m);
  EXPECT_FALSE(m->has_mtp());
  const std::vector<std::vector<int32_t>> ids{v4_test::test_ids(40, 1), v4_test::test_ids(40, 2),
                                              v4_test::test_ids(40, 3)};
  std::vector<std::vector<float>> alone;
  for (int s = 0; s < 3; ++s) alone.push_back(run_alone(*m, ids[s], s));
  std::vector<SequenceState> seqs(3);
  for (int s = 0; s < 3; ++s) {
    for (int b = 0; b < 8; ++b) seqs[s].block_table.push_back(s * 8 + b);
    seqs[s].state_slot = s;
  }
  std::vector<std::vector<float>> got(3);
  LogitsOutput out;
  for (size_t at = 0; at < 40; at += 7) {  // chunks of 7 for all three in each call
    const size_t n = std::min<size_t>(7, 40 - at);
    std::vector<ForwardRequest> reqs;
    for (int s = 0; s < 3; ++s) reqs.push_back(ForwardRequest{&seqs[s], {ids[s].data() + at, n}, true});
    ASSERT_TRUE(m->forward(reqs, out).ok());
    for (int s = 0; s < 3; ++s) {
      const float* b = out.logits.row(out.row_begin[s]);
      got[s].insert(got[s].end(), b, b + (out.row_begin[s + 1] - out.row_begin[s]) * 129280);
    }
  }
  for (int s = 0; s < 3; ++s) EXPECT_TRUE(got[s] == alone[s]) << "sequence " << s;
  // Another slot and the blocks in reverse order: the same bits.
  EXPECT_TRUE(run_alone(*m, ids[0], 3, /*reversed=*/true) == alone[0]);
  // And the sequences differ (the comparison is not vacuous).
  EXPECT_FALSE(alone[0] == alone[1]);

  // Engram matters: the same checkpoint without it gives other logits.
  ModelRunner* with = m.get();
  const EditedCopy off("ds_v41_no_engram_", [](nlohmann::json& t) {
    t["engram_layer_ids"] = nlohmann::json::array();
    t["engram_num_embeddings"] = nlohmann::json::array();
  });
  ModelOptions o;
  o.isa = best_isa();
  o.n_threads = 2;
  o.max_seq_len = 128;
  Result<std::unique_ptr<ModelRunner>> without = load_model(off.path(), o);
  ASSERT_TRUE(without.ok()) << without.status().to_string();
  ASSERT_TRUE((*without)->init_kv_cache(standalone_kv_cache_config(128, 16)).ok());
  const std::vector<int32_t> short_ids = v4_test::test_ids(12, 5);
  EXPECT_FALSE(run_alone(*with, short_ids, 0) == run_alone(**without, short_ids, 0));
  // The replay starts max_ngram_size − 1 = 3 tokens before the window (swa_replay.h).
  EXPECT_EQ(with->kv_cache_layout().swa_replay_tokens, (*without)->kv_cache_layout().swa_replay_tokens + 3);
}

// One test (one process, one generated checkpoint) for the three load errors.
TEST(V41Model, EngramLoadErrorsNameTheKey) {
  // Without the token map (the model module reads no tokenizer).
  ModelOptions o;
  o.max_seq_len = 64;
  Result<std::unique_ptr<ModelRunner>> m = load_model_runner(tiny_v41(), o);  // no tokenizer read
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::model_unsupported);
  EXPECT_NE(m.status().message().find("text_config.engram_layer_ids"), std::string::npos)
      << m.status().message();
  // A compressed vocabulary of the wrong size names the tokenizer and the key.
  {
    const EditedCopy bad("ds_v41_cvocab_", [](nlohmann::json& t) {
      t["engram_compressed_vocab_size"] = t["engram_compressed_vocab_size"].get<int>() + 1;
    });
    m = load_model(bad.path(), o);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), ErrorCode::tokenizer_bad_file);
    EXPECT_NE(m.status().message().find("tokenizer.json"), std::string::npos) << m.status().message();
    EXPECT_NE(m.status().message().find("text_config.engram_compressed_vocab_size"), std::string::npos)
        << m.status().message();
  }
  // A table row count that is not the layer's Σ primes.
  const EditedCopy bad("ds_v41_rows_", [](nlohmann::json& t) {
    t["engram_num_embeddings"][0] = t["engram_num_embeddings"][0].get<int64_t>() + 1;
  });
  m = load_model(bad.path(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("text_config.engram_num_embeddings"), std::string::npos)
      << m.status().message();
}

}  // namespace
}  // namespace ds
