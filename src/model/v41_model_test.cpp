// DeepSeek-V4.1 forward on the generated tiny checkpoint (make-model --arch deepseek_v41 --preset
// tiny): loaded through the model registry; batch invariance (readers and pool layers take their
// source's state per sequence), block-table independence, and Engram refused with the key named.
// Agreement with the float64 reference: tests/reference (ctest reference_logits_v41_tiny).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
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
  Result<std::unique_ptr<ModelRunner>> m = load_model_runner(tiny_v41(), o);
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
}

TEST(V41Model, EngramCheckpointIsRefusedNamingTheKey) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("ds_v41_engram_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(tiny_v41())) fs::copy(e.path(), dir / e.path().filename());
  std::ifstream in(dir / "config.json");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  // The preset writes "engram_layer_ids": []; give it the released Engram keys on layers 1 and 4.
  const std::string key = "\"engram_layer_ids\": []";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(
      at, key.size(),
      "\"engram_layer_ids\": [1, 4], \"engram_num_embeddings\": [384006168, 384016682], "
      "\"engram_max_ngram_size\": 4, \"engram_vocab_size\": 16000000, \"engram_n_heads\": 8, "
      "\"engram_head_dim\": 256, \"engram_pad_token_id\": 2, \"engram_compressed_vocab_size\": 99092");
  std::ofstream(dir / "config.json") << text;
  ModelOptions o;
  o.max_seq_len = 64;
  Result<std::unique_ptr<ModelRunner>> m = load_model_runner(dir.string(), o);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::model_unsupported);
  EXPECT_NE(m.status().message().find("text_config.engram_layer_ids"), std::string::npos)
      << m.status().message();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ds
