// FakeModelRunner: a ModelRunner without tensors for engine tests and benchmarks. Its "KV cache" is
// real paged bookkeeping: each cached position holds a rolling hash of the sequence's tokens up to
// it, written into the block the block table names and read back through it. A row's logits are a
// pure function of that hash, so they depend on every token of the sequence exactly as a real model
// does — a wrong block table, a stale shared block or a dropped token changes the output — and
// reference_logits() recomputes them from the token list alone, without the cache.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <vector>

#include "model/model_runner.h"

namespace ds::testing {

struct FakeModelOptions {
  int32_t vocab_size = 512;
  int32_t eos_token_id = 1;
  int64_t max_seq_len = 4096;
  int32_t block_size_multiple = 1;
  uint64_t seed = 0;               // changes every logit
  int64_t step_sleep_us = 0;       // simulated compute per forward call
  int64_t row_sleep_ns = 0;        // simulated compute per token row
  float eos_logit_offset = -4.0f;  // added to EOS's logit (negative: generations rarely stop early)
  int32_t image_token_id = -1;     // config().image_token_id (V4.1's image placeholder)
};

class FakeModelRunner final : public ModelRunner {
 public:
  explicit FakeModelRunner(const FakeModelOptions& options);

  const ModelConfig& config() const override { return config_; }
  KvCacheLayout kv_cache_layout() const override;
  Status init_kv_cache(const KvCacheConfig& cfg) override;
  const KvCacheConfig& kv_cache_config() const override { return kv_cfg_; }
  Status forward(std::span<const ForwardRequest> requests, LogitsOutput& out) override;
  bool has_mtp() const override { return false; }
  Status forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) override;

  // The logits row after `tokens` (the whole sequence so far), computed without any cache.
  std::vector<float> reference_logits(std::span<const int32_t> tokens) const;
  // The greedy continuation of `prompt` (n tokens), from reference_logits.
  std::vector<int32_t> reference_greedy(std::span<const int32_t> prompt, int n) const;

  // Observations for tests (safe to read from another thread).
  struct Counters {
    int64_t n_forward_calls = 0;
    int64_t n_rows = 0;
    int64_t max_requests_per_call = 0;
  };
  Counters counters() const;

 private:
  uint64_t hash_step(uint64_t prev, int32_t token) const;
  void fill_logits(uint64_t hash, float* row) const;
  Status validate(std::span<const ForwardRequest> requests) const;

  FakeModelOptions opts_;
  ModelConfig config_;
  KvCacheConfig kv_cfg_;
  // [n_blocks, block_size] rolling hashes; written[i] says whether cell i holds one.
  std::vector<uint64_t> cells_;
  std::vector<uint8_t> written_;
  mutable std::mutex counters_mu_;
  Counters counters_;  // guarded by counters_mu_
};

}  // namespace ds::testing
