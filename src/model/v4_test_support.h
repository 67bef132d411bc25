// Shared by the V4 model tests (v4_model_test.cpp, v4_replay_test.cpp; one executable): the
// generated tiny checkpoint (make-model --arch deepseek_v4 --preset tiny, FP8 + FP4 experts), the
// tests' cache, and running the numpy reference (tests/reference/deepseek_v4_ref.py).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/deepseek_v4.h"
#include "modelgen/make_model.h"

namespace ds::v4_test {

// A generated tiny V4 checkpoint private to this test process, removed at exit.
class TinyV4Dir {
 public:
  TinyV4Dir() : dir_(::testing::TempDir() + "/ds_v4_model_test_" + std::to_string(::getpid())) {
    modelgen::MakeModelOptions o;
    o.arch = "deepseek_v4";
    o.preset = "tiny";
    o.fp8 = true;
    o.seed = 0;
    o.out_dir = dir_;
    o.tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR;
    ThreadPool pool(2);
    Result<modelgen::MakeModelReport> r = modelgen::make_model(o, pool);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
  }
  ~TinyV4Dir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::string& path() const { return dir_; }

 private:
  std::string dir_;
};

inline const std::string& tiny_dir() {
  static const TinyV4Dir d;
  return d.path();
}

// 70 ids (BOS + seeded random): wraps the 16-token window 4 times, completes 17 CSA entries
// (index_topk 8: top-k selection is active from position 35) and 4 HCA entries.
inline std::vector<int32_t> test_ids(int n = 70, uint32_t seed = 7) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids{0};
  while (static_cast<int>(ids.size()) < n) ids.push_back(static_cast<int32_t>(rng() % 129280));
  return ids;
}

// Speculative decoding's roll-back (model/v4_chunk_undo.h): a prefill of ids[0, n_prefill), then
// "verify" chunks [ids[p], guess_1 .. guess_k] with may_truncate, k = 1..4 in turn, whose guesses
// are right for all, none or half of the positions (then junk); each keeps 1 + the right ones and
// lowers n_tokens to them. Returns the logits row of every position in order: a run that never
// saw the junk must give the same bits.
inline std::vector<float> run_with_rejections(ModelRunner& m, const std::vector<int32_t>& ids,
                                              size_t n_prefill, int slot) {
  const int64_t vocab = m.config().vocab_size;
  SequenceState seq;
  for (int b = 0; b < 8; ++b) seq.block_table.push_back(slot * 8 + b);
  seq.state_slot = slot;
  LogitsOutput out;
  ForwardRequest pre{&seq, {ids.data(), n_prefill}, true};
  EXPECT_TRUE(m.forward({&pre, 1}, out).ok());
  std::vector<float> rows(out.logits.data(), out.logits.data() + out.logits.numel());
  std::mt19937 rng(3);
  size_t p = n_prefill;
  for (int step = 0; p < ids.size(); ++step) {
    const int k = 1 + step % 4;
    const int right = step % 3 == 0 ? k : step % 3 == 1 ? 0 : k / 2;
    std::vector<int32_t> chunk{ids[p]};
    for (int j = 1; j <= k; ++j) {
      const size_t at = p + static_cast<size_t>(j);
      chunk.push_back(j <= right && at < ids.size() ? ids[at] : static_cast<int32_t>(rng() % vocab));
    }
    ForwardRequest req{&seq, {chunk.data(), chunk.size()}, true};
    req.may_truncate = true;
    const Status st = m.forward({&req, 1}, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return rows;
    const size_t kept = std::min<size_t>(1 + static_cast<size_t>(right), ids.size() - p);
    rows.insert(rows.end(), out.logits.data(), out.logits.data() + static_cast<int64_t>(kept) * vocab);
    seq.n_tokens = static_cast<int64_t>(p + kept);  // the rejected rows are dropped
    p += kept;
  }
  return rows;
}

// The tests' cache: 16-token blocks, 4 slots; `mtp_layer` as KvCacheConfig::mtp_layer.
inline std::unique_ptr<DeepSeekV4> load(const V4Numerics& num = {}, Isa isa = Isa::reference,
                                        bool mtp_layer = true, bool bf16_activations = false) {
  ModelOptions o;
  o.isa = isa;
  o.bf16_activations = bf16_activations;
  o.n_threads = 2;
  o.max_seq_len = 128;
  Result<std::unique_ptr<DeepSeekV4>> m = DeepSeekV4::load(tiny_dir(), o, num);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return nullptr;
  KvCacheConfig kc = standalone_kv_cache_config(128, 16);
  kc.n_blocks *= 4;
  kc.n_sequence_slots = 4;
  kc.mtp_layer = mtp_layer;
  EXPECT_TRUE((*m)->init_kv_cache(kc).ok());
  return std::move(*m);
}

// A float64 .npy written by numpy (little-endian '<f8', C order, 2-D).
inline std::vector<double> read_npy_f64(const std::string& path, int64_t& rows, int64_t& cols) {
  std::ifstream f(path, std::ios::binary);
  std::string magic(8, '\0');
  f.read(magic.data(), 8);
  uint16_t hlen = 0;
  f.read(reinterpret_cast<char*>(&hlen), 2);
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  EXPECT_NE(header.find("'<f8'"), std::string::npos) << header;
  const size_t s = header.find("'shape': (");
  rows = std::stoll(header.substr(s + 10));
  cols = std::stoll(header.substr(header.find(',', s + 10) + 1));
  std::vector<double> v(static_cast<size_t>(rows * cols));
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
  return v;
}

struct Diff {
  double max_abs = 0, max_ref = 0;
  int64_t argmax_mismatch = 0;
};

inline Diff compare(const std::vector<float>& got, const std::vector<double>& ref, int64_t cols) {
  Diff d;
  EXPECT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < std::min(got.size(), ref.size()); ++i) {
    d.max_abs = std::max(d.max_abs, std::abs(got[i] - ref[i]));
    d.max_ref = std::max(d.max_ref, std::abs(ref[i]));
  }
  for (int64_t r = 0; r * cols < static_cast<int64_t>(std::min(got.size(), ref.size())); ++r) {
    int64_t ag = 0, ar = 0;
    for (int64_t c = 1; c < cols; ++c) {
      if (got[r * cols + c] > got[r * cols + ag]) ag = c;
      if (ref[r * cols + c] > ref[r * cols + ar]) ar = c;
    }
    d.argmax_mismatch += ag != ar;
  }
  return d;
}

// Runs the numpy reference (skips when python3/numpy or the script is unavailable).
inline bool run_reference(const std::vector<int32_t>& ids, const std::string& extra, const std::string& out,
                          const std::string& mtp_out) {
  std::string tokens;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) tokens.push_back(',');
    tokens.append(std::to_string(ids[i]));
  }
  const std::string cmd = std::string(DS_PYTHON3) + " " + DS_V4_REFERENCE + " --model " + tiny_dir() +
                          " --tokens " + tokens + " --out " + out + " --mtp-out " + mtp_out + " " + extra +
                          " 2>/dev/null";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace ds::v4_test
