// DeepSeek-V4.1 forward on the generated tiny checkpoint (make-model --arch deepseek_v41 --preset
// tiny, Engram on layers 1 and 2): loaded as applications load it (engine/model_loader.h builds
// the Engram token map from the checkpoint's tokenizer); batch invariance (readers and pool layers
// take their source's state per sequence, Engram its history per sequence, in chunks), block-table
// independence, Engram's load errors naming the key, and the replay margin Engram adds.
// Agreement with the float64 reference: tests/reference (ctest reference_logits_v41_tiny).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "engine/model_loader.h"
#include "model/decoder_replay.h"
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

std::unique_ptr<ModelRunner> load_v41(DecoderReplayOptions replay = {}, const std::string& numerics = "") {
  ModelOptions o;
  o.decoder_replay = replay;
  o.numerics = numerics;
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

std::vector<float> run_alone(ModelRunner& m, const std::vector<int32_t>& ids, int slot, bool reversed = false,
                             int64_t prompt_len = 0) {
  SequenceState seq;
  seq.prompt_len = prompt_len;
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

// Decoder replay (model/decoder_replay.h): the tiny preset's decoder is layers 4..7 (KV source 4).
constexpr int64_t kVocab = 129280;

// Runs `ids` as `chunk`-token chunks for every sequence of the batch at once (prompt_len = ids'
// length each), then `decode` teacher-forced single tokens; returns each sequence's logits rows.
std::vector<std::vector<float>> run_batch(ModelRunner& m, const std::vector<std::vector<int32_t>>& ids,
                                          size_t prompt, size_t chunk,
                                          std::vector<int64_t>* n_rows = nullptr) {
  const size_t n_seq = ids.size();
  std::vector<SequenceState> seqs(n_seq);
  for (size_t s = 0; s < n_seq; ++s) {
    for (int b = 0; b < 8; ++b) seqs[s].block_table.push_back(static_cast<int32_t>(s) * 8 + b);
    seqs[s].state_slot = static_cast<int32_t>(s);
    seqs[s].prompt_len = static_cast<int64_t>(prompt);
  }
  std::vector<std::vector<float>> got(n_seq);
  LogitsOutput out;
  for (size_t at = 0; at < ids[0].size();) {
    const size_t n = at < prompt ? std::min(chunk, prompt - at) : 1;
    std::vector<ForwardRequest> reqs;
    for (size_t s = 0; s < n_seq; ++s)
      reqs.push_back(ForwardRequest{&seqs[s], {ids[s].data() + at, n}, true});
    EXPECT_TRUE(m.forward(reqs, out).ok());
    for (size_t s = 0; s < n_seq; ++s) {
      const float* b = out.logits.row(out.row_begin[s]);
      got[s].insert(got[s].end(), b, b + (out.row_begin[s + 1] - out.row_begin[s]) * kVocab);
    }
    at += n;
  }
  if (n_rows != nullptr)
    for (const auto& g : got) n_rows->push_back(static_cast<int64_t>(g.size()) / kVocab);
  return got;
}

TEST(V41DecoderReplay, ChunkedBatchedAndDecodeEqualOnePass) {
  auto exact = load_v41();
  auto replay = load_v41({.compact = true, .keep_tokens = 20});
  ASSERT_TRUE(exact && replay);
  const std::vector<std::vector<int32_t>> ids{v4_test::test_ids(46, 1), v4_test::test_ids(46, 2),
                                              v4_test::test_ids(46, 3)};
  constexpr size_t kPrompt = 40;  // cut at 40 − 20 = 20; then 6 teacher-forced decode steps
  std::vector<int64_t> rows;
  const auto one_pass = run_batch(*replay, {ids[0]}, kPrompt, kPrompt, &rows);
  EXPECT_EQ(rows[0], 20 + 6);  // only the rows from the cut reach the head
  // Chunks of 7 (two wholly before the cut give no rows, one straddles it), three sequences at once.
  rows.clear();
  const auto chunked = run_batch(*replay, ids, kPrompt, 7, &rows);
  EXPECT_EQ(rows, (std::vector<int64_t>{26, 26, 26}));
  EXPECT_TRUE(chunked[0] == one_pass[0]);
  for (size_t s = 1; s < 3; ++s) EXPECT_TRUE(chunked[s] == run_batch(*replay, {ids[s]}, kPrompt, kPrompt)[0]);
  EXPECT_FALSE(chunked[0] == chunked[1]);

  // Without a prompt length the replay model is the exact model, bit for bit.
  const auto exact_rows = run_batch(*exact, {ids[0]}, kPrompt, kPrompt)[0];
  EXPECT_EQ(exact_rows.size(), 46 * kVocab);
  EXPECT_TRUE(run_alone(*replay, ids[0], 0) == run_alone(*exact, ids[0], 0));
  // Replay changes the rows from the cut on (the decoder's window starts at the cut) but not by much.
  const std::vector<float> exact_tail(exact_rows.end() - 26 * kVocab, exact_rows.end());
  ASSERT_EQ(exact_tail.size(), one_pass[0].size());
  EXPECT_FALSE(exact_tail == one_pass[0]);
  double max_d = 0, max_ref = 0;
  for (size_t i = 0; i < exact_tail.size(); ++i) {
    max_d = std::max(max_d, static_cast<double>(std::abs(exact_tail[i] - one_pass[0][i])));
    max_ref = std::max(max_ref, static_cast<double>(std::abs(exact_tail[i])));
  }
  EXPECT_LT(max_d, max_ref);
  // A prompt no longer than keep_tokens is exact.
  EXPECT_TRUE(run_alone(*replay, ids[1], 1, false, 20) == run_alone(*exact, ids[1], 1, false, 20));
}

// The release's index-key publishing (model-spec §9, --numerics index_keys=on_group): a KV source
// publishes its keys only on steps where its compressor completes a group. A prefill completes
// groups in every chunk, so it is the exact computation; token-by-token decode is not: on a step
// at an even position the ratio-2 source (tiny layer 2) does not complete its group and its index
// layer scores the keys the ratio-1 source (layer 4) published on the previous step.
TEST(V41IndexKeyPublishing, OnGroupDecodeDiffersFromPrefillFromTheFirstTopKChoice) {
  constexpr size_t kN = 32;
  const std::vector<int32_t> ids = v4_test::test_ids(kN, 9);
  for (const bool on_group : {false, true}) {
    auto m = load_v41({}, on_group ? "index_keys=on_group" : "index_keys=every_step");
    ASSERT_TRUE(m);
    const auto prefill = run_batch(*m, {ids}, kN, kN)[0];
    const auto decode = run_batch(*m, {ids}, 1, 1)[0];  // one-token prompt, then one token a step
    ASSERT_EQ(prefill.size(), decode.size());
    size_t first = kN;
    for (size_t row = 0; row < kN && first == kN; ++row) {
      if (!std::equal(prefill.begin() + row * kVocab, prefill.begin() + (row + 1) * kVocab,
                      decode.begin() + row * kVocab))
        first = row;
    }
    if (!on_group) {
      EXPECT_EQ(first, kN) << "every-step publishing: decode equals prefill";
      continue;
    }
    // Before position 14 layer 2 sees at most index_topk = 6 entries and takes them all whatever
    // it scores them with; from there the top-6 of (p + 1) / 2 entries is a choice, and the first
    // row that differs is one where layer 2 did not publish (an even position).
    EXPECT_GE(first, 14u);
    EXPECT_LT(first, kN) << "on_group publishing: decode must stop matching prefill";
    EXPECT_EQ(first % 2, 0u) << "first differing row " << first;
  }
  auto prefill_only = load_v41({}, "index_keys=on_group");
  auto every_step = load_v41({}, "");
  EXPECT_TRUE(run_batch(*prefill_only, {ids}, kN, kN)[0] == run_batch(*every_step, {ids}, kN, kN)[0])
      << "a prefill publishes on every chunk: the release's prefill is the exact one";
}

TEST(V41DecoderReplay, OptionErrors) {
  ModelOptions o;
  o.max_seq_len = 64;
  o.decoder_replay = {.compact = true, .keep_tokens = 15};  // below the tiny window of 16
  Result<std::unique_ptr<ModelRunner>> m = load_model(tiny_v41(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::invalid_argument);
  EXPECT_NE(m.status().message().find("--yoco-prefill-keep-tokens 15"), std::string::npos)
      << m.status().message();
  EXPECT_FALSE(parse_decoder_replay_mode("on", "X").ok());
  EXPECT_TRUE(*parse_decoder_replay_mode("compact", "X"));
  EXPECT_FALSE(*parse_decoder_replay_mode("off", "X"));
  EXPECT_FALSE(parse_decoder_replay_keep("0", "X").ok());
  EXPECT_FALSE(parse_decoder_replay_keep("12a", "X").ok());
  EXPECT_EQ(*parse_decoder_replay_keep("140", "X"), 140);
  EXPECT_EQ(decoder_first_position({.compact = true, .keep_tokens = 140}, 1000), 860);
  EXPECT_EQ(decoder_first_position({.compact = true, .keep_tokens = 140}, 100), 0);
  EXPECT_EQ(decoder_first_position({.compact = false, .keep_tokens = 140}, 1000), 0);
  EXPECT_EQ(decoder_first_position({.compact = true, .keep_tokens = 140}, 0), 0);
}

// Roll-back inside journaled chunks (model/v4_chunk_undo.h) on V4.1: the ratio-2 and ratio-1
// compressors, index keys, rings and Engram's history come back bit for bit.
TEST(V41Model, TruncatingJournaledChunksEqualsARunWithoutTheRejectedRows) {
  auto m = load_v41();
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->supports_truncation());
  const std::vector<int32_t> ids = v4_test::test_ids(60, 8);
  const std::vector<float> want = run_alone(*m, ids, 0);
  const std::vector<float> got = v4_test::run_with_rejections(*m, ids, 7, 1);
  ASSERT_EQ(got.size(), want.size());
  int64_t first_diff = -1;
  for (size_t i = 0; i < got.size() && first_diff < 0; ++i)
    if (got[i] != want[i]) first_diff = static_cast<int64_t>(i) / 129280;
  EXPECT_EQ(first_diff, -1) << "first differing row";
}

// DSpark (docs/dspark.md): the target's context features of one sequence, every row (all_hidden),
// fed `chunk` ids per forward.
std::vector<float> dspark_features(ModelRunner& m, const std::vector<int32_t>& ids, SequenceState& seq,
                                   size_t chunk) {
  std::vector<float> f;
  LogitsOutput out;
  for (size_t at = 0; at < ids.size(); at += chunk) {
    ForwardRequest req{&seq, {ids.data() + at, std::min(chunk, ids.size() - at)}, false};
    req.all_hidden = true;
    EXPECT_TRUE(m.forward({&req, 1}, out).ok());
    EXPECT_EQ(out.hidden_row_begin.back(), static_cast<int64_t>(req.tokens.size()));
    f.insert(f.end(), out.hidden.data(), out.hidden.data() + out.hidden.numel());
  }
  return f;
}

SequenceState slot_sequence(int slot) {
  SequenceState seq;
  for (int b = 0; b < 8; ++b) seq.block_table.push_back(slot * 8 + b);
  seq.state_slot = slot;
  return seq;
}

std::vector<float> block_rows(const DraftBlockOutput& out, int64_t block, int64_t B, int64_t width,
                              bool logits) {
  const TensorF32& t = logits ? out.logits : out.hidden;
  return std::vector<float>(t.row(block * B), t.row(block * B) + B * width);
}

TEST(V41DSpark, FeaturesAreChunkInvariantAndBlocksBatchInvariant) {
  auto m = load_v41();
  ASSERT_TRUE(m);
  DraftBlockModel* dm = m->draft_block_model();
  ASSERT_NE(dm, nullptr);
  const int64_t B = dm->block_size(), d = m->config().hidden_size, V = m->config().vocab_size;
  EXPECT_EQ(B, 5);
  const std::vector<int32_t> a = v4_test::test_ids(40, 4), b = v4_test::test_ids(33, 5);
  SequenceState sa = slot_sequence(0), sb = slot_sequence(1), sa_steps = slot_sequence(2);
  const std::vector<float> fa = dspark_features(*m, a, sa, a.size());
  const std::vector<float> fb = dspark_features(*m, b, sb, b.size());
  // Decode gives the prefill's features (the target is chunk-invariant, and so are they).
  EXPECT_TRUE(dspark_features(*m, a, sa_steps, 1) == fa);
  ASSERT_EQ(fa.size(), a.size() * d);

  // Context: every position before the anchor (the last id).
  auto feed = [&](SequenceState& s, const std::vector<float>& f, size_t n) {
    return dm->extend(s, 0, {f.data(), (n - 1) * d});
  };
  ASSERT_TRUE(feed(sa, fa, a.size()).ok());
  ASSERT_TRUE(feed(sb, fb, b.size()).ok());
  const DraftBlockRequest qa{&sa, a.back(), static_cast<int64_t>(a.size()) - 1};
  const DraftBlockRequest qb{&sb, b.back(), static_cast<int64_t>(b.size()) - 1};
  DraftBlockOutput alone_a, alone_b, both;
  ASSERT_TRUE(dm->draft({&qa, 1}, alone_a).ok());
  ASSERT_TRUE(dm->draft({&qb, 1}, alone_b).ok());
  const DraftBlockRequest pair[] = {qb, qa};
  ASSERT_TRUE(dm->draft(pair, both).ok());
  EXPECT_TRUE(block_rows(both, 1, B, V, true) == block_rows(alone_a, 0, B, V, true));
  EXPECT_TRUE(block_rows(both, 0, B, V, true) == block_rows(alone_b, 0, B, V, true));
  EXPECT_TRUE(block_rows(both, 1, B, d, false) == block_rows(alone_a, 0, B, d, false));
  // Drafting reads the context and leaves it: the same request again gives the same bits.
  DraftBlockOutput again;
  ASSERT_TRUE(dm->draft({&qa, 1}, again).ok());
  EXPECT_TRUE(block_rows(again, 0, B, V, true) == block_rows(alone_a, 0, B, V, true));
  // The context matters: b's context under a's anchor gives other logits.
  SequenceState sc = slot_sequence(3);
  ASSERT_TRUE(dm->extend(sc, 0, {fb.data(), (b.size() - 1) * d}).ok());
  const DraftBlockRequest qc{&sc, a.back(), static_cast<int64_t>(b.size()) - 1};
  DraftBlockOutput other;
  ASSERT_TRUE(dm->draft({&qc, 1}, other).ok());
  EXPECT_FALSE(block_rows(other, 0, B, V, true) == block_rows(alone_a, 0, B, V, true));

  // The heads: the Markov bias moves the logits and depends on the previous token; the confidence
  // is a probability that depends on it too.
  std::vector<float> z0(alone_a.logits.row(0), alone_a.logits.row(0) + V), z1 = z0;
  dm->add_markov_bias(a.back(), z0);
  dm->add_markov_bias(a.back() == 7 ? 8 : 7, z1);
  EXPECT_FALSE(z0 == z1);
  const std::span<const float> h0(alone_a.hidden.row(0), static_cast<size_t>(d));
  const float c0 = dm->confidence(h0, a.back()), c1 = dm->confidence(h0, a.back() == 7 ? 8 : 7);
  EXPECT_GT(c0, 0.0f);
  EXPECT_LT(c0, 1.0f);
  EXPECT_NE(c0, c1);
}

TEST(V41DSpark, ContextRestartsAndBadRequests) {
  auto m = load_v41();
  ASSERT_TRUE(m);
  DraftBlockModel* dm = m->draft_block_model();
  ASSERT_NE(dm, nullptr);
  const int64_t d = m->config().hidden_size, V = m->config().vocab_size, B = dm->block_size();
  const std::vector<int32_t> a = v4_test::test_ids(30, 6);
  SequenceState sa = slot_sequence(0);
  const std::vector<float> fa = dspark_features(*m, a, sa, a.size());
  // Fed in two parts = fed at once.
  ASSERT_TRUE(dm->extend(sa, 0, {fa.data(), 10 * static_cast<size_t>(d)}).ok());
  ASSERT_TRUE(dm->extend(sa, 10, {fa.data() + 10 * d, 19 * static_cast<size_t>(d)}).ok());
  const DraftBlockRequest q{&sa, a.back(), 29};
  DraftBlockOutput parts, once;
  ASSERT_TRUE(dm->draft({&q, 1}, parts).ok());
  // A position other than the count fed starts the context over: from 0, all of it again.
  ASSERT_TRUE(dm->extend(sa, 0, {fa.data(), 29 * static_cast<size_t>(d)}).ok());
  ASSERT_TRUE(dm->draft({&q, 1}, once).ok());
  EXPECT_TRUE(block_rows(parts, 0, B, V, true) == block_rows(once, 0, B, V, true));
  // An anchor position that is not the count fed, or an anchor id outside the vocabulary.
  DraftBlockOutput out;
  const DraftBlockRequest early{&sa, a.back(), 28}, bad_id{&sa, static_cast<int32_t>(V), 29};
  EXPECT_EQ(dm->draft({&early, 1}, out).code(), ErrorCode::model_bad_input);
  EXPECT_EQ(dm->draft({&bad_id, 1}, out).code(), ErrorCode::model_bad_input);
  SequenceState fresh = slot_sequence(1);  // nothing fed yet
  const DraftBlockRequest unfed{&fresh, a.back(), 0};
  EXPECT_EQ(dm->draft({&unfed, 1}, out).code(), ErrorCode::model_bad_input);
}

TEST(V41DSpark, WithoutTheKeysTheStagesAreNotLoaded) {
  // The stages' tensors stay in the files, but a config without dspark_* keys has no drafter and
  // gives the final normed rows as hidden rows.
  const EditedCopy copy("ds_v41_no_dspark_", [](nlohmann::json& t) {
    for (const char* k : {"dspark_block_size", "dspark_noise_token_id", "dspark_target_layer_ids",
                          "dspark_markov_rank", "dspark_n_routed_experts", "dspark_num_experts_per_tok"})
      t.erase(k);
    t["num_nextn_predict_layers"] = 0;
    std::vector<int> ratios = t["compress_ratios"];
    ratios.resize(static_cast<size_t>(t["num_hidden_layers"].get<int>()));
    t["compress_ratios"] = ratios;
  });
  ModelOptions o;
  o.isa = best_isa();
  o.n_threads = 2;
  o.max_seq_len = 64;
  Result<std::unique_ptr<ModelRunner>> m = load_model(copy.path(), o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->draft_block_model(), nullptr);
}

}  // namespace
}  // namespace ds
