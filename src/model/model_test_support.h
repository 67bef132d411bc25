// Shared by the model tests (model_test.cpp, paged_kv_test.cpp, one executable): the generated
// tiny checkpoints, loading with the tests' paged cache, and running a sequence chunk by chunk.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/deepseek_v3.h"
#include "modelgen/make_model.h"

namespace ds::model_test {

// A generated tiny checkpoint in a directory private to this test process (ctest runs test
// processes in parallel), removed when the process exits.
class TinyModelDir {
 public:
  explicit TinyModelDir(bool fp8)
      : dir_(::testing::TempDir() + "/ds_model_test_tiny_" + (fp8 ? "fp8_" : "bf16_") +
             std::to_string(::getpid())) {
    modelgen::MakeModelOptions o;
    o.preset = "tiny";
    o.fp8 = fp8;
    o.seed = 3;
    o.out_dir = dir_;
    o.tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR;
    ThreadPool pool(2);
    Result<modelgen::MakeModelReport> r = modelgen::make_model(o, pool);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
  ~TinyModelDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TinyModelDir(const TinyModelDir&) = delete;
  TinyModelDir& operator=(const TinyModelDir&) = delete;
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

// Generated once per test process, and only the formats a test asks for.
inline const std::string& tiny_dir(bool fp8) {
  if (fp8) {
    static const TinyModelDir fp8_dir(true);
    return fp8_dir.path();
  }
  static const TinyModelDir bf16_dir(false);
  return bf16_dir.path();
}

// The tests' cache: 4-token blocks (so 12 ids span 3 blocks and chunks cross block edges), room
// for kSeqSlots sequences of max_seq_len 64.
constexpr int32_t kBlockSize = 4;
constexpr int32_t kSeqBlocks = 64 / kBlockSize;
constexpr int32_t kSeqSlots = 4;

inline std::unique_ptr<DeepSeekV3> load(bool fp8, Isa isa = Isa::reference, MlaMode mode = MlaMode::absorbed,
                                        int threads = 2) {
  ModelOptions o;
  o.isa = isa;
  o.n_threads = threads;
  o.mla_mode = mode;
  o.max_seq_len = 64;
  Result<std::unique_ptr<DeepSeekV3>> m = DeepSeekV3::load(tiny_dir(fp8), o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  const Status st = (*m)->init_kv_cache({kBlockSize, kSeqSlots * kSeqBlocks});
  EXPECT_TRUE(st.ok()) << st.to_string();
  return std::move(m).value();
}

// A sequence owning blocks [first, first + n) in order.
inline SequenceState blocks_from(int32_t first, int32_t n = kSeqBlocks) {
  SequenceState s;
  for (int32_t b = 0; b < n; ++b) s.block_table.push_back(first + b);
  return s;
}

inline const std::vector<int32_t> kIds = {0, 17, 42, 9000, 128000, 5, 77, 1234, 31, 100000, 64, 2};

struct SeqRun {
  std::vector<float> logits;  // [n_ids, vocab]
  std::vector<float> hidden;  // [n_ids, hidden]
  std::vector<float> mtp;     // [n_ids - 1, vocab]
};

// Feeds ids in chunks of the given sizes (the last size repeats), all logits kept, into `seq`
// (default: the first kSeqBlocks blocks of the cache). With MTP, every row is fed to the MTP
// layer afterwards in the same chunking.
inline SeqRun run(DeepSeekV3& m, const std::vector<int32_t>& ids, const std::vector<size_t>& chunks,
                  bool with_mtp = false, SequenceState seq = blocks_from(0)) {
  SeqRun r;
  LogitsOutput out;
  size_t pos = 0, c = 0;
  while (pos < ids.size()) {
    const size_t n = std::min(chunks[std::min(c++, chunks.size() - 1)], ids.size() - pos);
    ForwardRequest req{&seq, {ids.data() + pos, n}, true};
    const Status st = m.forward({&req, 1}, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    r.logits.insert(r.logits.end(), out.logits.data(), out.logits.data() + out.logits.numel());
    r.hidden.insert(r.hidden.end(), out.hidden.data(), out.hidden.data() + out.hidden.numel());
    pos += n;
  }
  if (with_mtp) {
    const int64_t H = m.config().hidden_size;
    size_t row = 0;
    c = 0;
    while (row + 1 < ids.size()) {
      const size_t n = std::min(chunks[std::min(c++, chunks.size() - 1)], ids.size() - 1 - row);
      MtpRequest req{&seq, {ids.data() + row + 1, n}, r.hidden.data() + static_cast<int64_t>(row) * H};
      const Status st = m.forward_mtp({&req, 1}, out);
      EXPECT_TRUE(st.ok()) << st.to_string();
      r.mtp.insert(r.mtp.end(), out.logits.data(), out.logits.data() + out.logits.numel());
      row += n;
    }
  }
  return r;
}

// max |a - b| / max(1, max |a|)
inline double rel_max_err(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double max_diff = 0, max_abs = 1;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(static_cast<double>(a[i]) - b[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(a[i])));
  }
  return max_diff / max_abs;
}

inline void expect_sane(const std::vector<float>& logits) {
  ASSERT_FALSE(logits.empty());
  double mean = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    mean += v;
  }
  mean /= static_cast<double>(logits.size());
  double var = 0;
  for (float v : logits) var += (v - mean) * (v - mean);
  EXPECT_GT(var / static_cast<double>(logits.size()), 1e-6) << "logits are constant";
}

using ds::supported_isas;  // the kernels' one list (kernels/isa.h), not a copy

}  // namespace ds::model_test
