// PoolLender: the decode server's KV pool as its transfers see it (docs/pd.md): fresh pool blocks
// reserved for a prefill server's puts, adopted as the prompt's cached blocks once they landed,
// released when the request ends (Engine::reserve_kv_blocks & co), and the pool's memory as
// extents to register with UCX. Leases (in a request's event sink) may outlive the decode service:
// once detach() ran — before the engine goes — release() does nothing. reserve and adopt are only
// called by transfers, which end before detach. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"

namespace ds::pd {

// A contiguous range of the pool's memory (page arrays that follow each other share one).
struct PoolExtent {
  std::byte* address = nullptr;
  size_t bytes = 0;
};

// The extents covering `arrays` of n_blocks blocks each, in address order.
std::vector<PoolExtent> pool_extents(const std::vector<KvPageArray>& arrays, int32_t n_blocks);

class PoolLender {
 public:
  using Clock = std::chrono::steady_clock;
  // At most max_lent_fraction of the pool is lent to transfers at once (the rest stays for the
  // running sequences: a slow prefill server holds its lease's blocks until the lease ends).
  PoolLender(Engine& engine, double max_lent_fraction);

  Result<std::vector<int32_t>> reserve(int32_t n) { return engine_->reserve_kv_blocks(n, max_lent_); }
  Result<int32_t> adopt(std::vector<int32_t> blocks, std::vector<int32_t> tokens, std::string cache_salt,
                        int64_t first_block) {
    return engine_->adopt_kv_blocks(std::move(blocks), std::move(tokens), std::move(cache_salt), first_block);
  }
  void release(std::vector<int32_t> blocks, std::optional<Clock::time_point> not_before = std::nullopt);
  void detach();

  const std::vector<KvPageArray>& arrays() const { return arrays_; }
  int32_t n_blocks() const { return n_blocks_; }
  const std::vector<PoolExtent>& extents() const { return extents_; }

 private:
  Engine* engine_;
  std::mutex mu_;
  bool attached_ = true;  // guarded by mu_
  std::vector<KvPageArray> arrays_;
  int32_t n_blocks_ = 0;
  int32_t max_lent_ = 0;
  std::vector<PoolExtent> extents_;
};

}  // namespace ds::pd
