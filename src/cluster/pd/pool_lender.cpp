#include "cluster/pd/pool_lender.h"

#include <algorithm>

namespace ds::pd {

std::vector<PoolExtent> pool_extents(const std::vector<KvPageArray>& arrays, int32_t n_blocks) {
  std::vector<PoolExtent> extents;
  for (const KvPageArray& a : arrays)
    extents.push_back({a.base, static_cast<size_t>(a.block_bytes) * static_cast<size_t>(n_blocks)});
  std::sort(extents.begin(), extents.end(),
            [](const PoolExtent& x, const PoolExtent& y) { return x.address < y.address; });
  std::vector<PoolExtent> merged;
  for (const PoolExtent& e : extents) {
    if (!merged.empty() && merged.back().address + merged.back().bytes >= e.address) {
      const std::byte* end = std::max(merged.back().address + merged.back().bytes, e.address + e.bytes);
      merged.back().bytes = static_cast<size_t>(end - merged.back().address);
    } else {
      merged.push_back(e);
    }
  }
  return merged;
}

PoolLender::PoolLender(Engine& engine, double max_lent_fraction)
    : engine_(&engine),
      arrays_(engine.kv_page_arrays()),
      n_blocks_(engine.kv_cache_config().n_blocks),
      max_lent_(static_cast<int32_t>(std::clamp(max_lent_fraction, 0.0, 1.0) * n_blocks_)),
      extents_(pool_extents(arrays_, n_blocks_)) {}

void PoolLender::release(std::vector<int32_t> blocks, std::optional<Clock::time_point> not_before) {
  std::lock_guard<std::mutex> lock(mu_);
  if (attached_) engine_->release_kv_blocks(std::move(blocks), not_before);
}

void PoolLender::detach() {
  std::lock_guard<std::mutex> lock(mu_);
  attached_ = false;
}

}  // namespace ds::pd
