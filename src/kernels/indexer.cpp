#include "kernels/indexer.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/kernel_table.h"
#include "kernels/topk.h"

namespace ds {
namespace {

void scores_range_flat(Isa isa, const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end, float* row) {
  kernel_table(isa).indexer_scores_range(a, i, t_begin, t_end, row);
}

// Paged keys: the range is cut at block boundaries and each span runs the flat path on its
// block's rows (entry t of the span is the span's row t - span_begin).
void scores_range(Isa isa, const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end, float* row) {
  if (a.key_block_table == nullptr) return scores_range_flat(isa, a, i, t_begin, t_end, row);
  const int64_t per_block = a.keys_per_block;
  for (int64_t t = t_begin; t < t_end;) {
    const int64_t in_block = t % per_block;
    const int64_t span = std::min(t_end - t, per_block - in_block);
    IndexerArgs s = a;
    s.keys = a.keys + (int64_t{a.key_block_table[t / per_block]} * per_block + in_block) * a.ldk;
    s.key_block_table = nullptr;
    scores_range_flat(isa, s, i, 0, span, row + t);
    t += span;
  }
}

// Entries per task when one query's keys are split over the pool (decode).
constexpr int64_t kKeysPerGrain = 64;

}  // namespace

void indexer_topk(Isa isa, ThreadPool& pool, const IndexerArgs& a) {
  if (a.n_q <= 0) return;
  // Decode (fewer queries than threads): each query's entries are split over the pool. Every
  // entry's score is computed by the same code whatever the split, so results do not change.
  const bool split_keys = a.n_q < pool.n_threads();
  auto one_query = [&](int64_t i, bool parallel) {
    const int64_t n_vis = std::clamp<int64_t>(a.n_visible[i], 0, a.n_keys);
    // The caller's score row when given, else scratch (one row per query).
    std::vector<float> own;
    if (a.scores == nullptr) own.resize(static_cast<size_t>(std::max<int64_t>(1, n_vis)));
    float* row = a.scores != nullptr ? a.scores + i * a.n_keys : own.data();
    const int64_t n_grains = (n_vis + kKeysPerGrain - 1) / kKeysPerGrain;
    if (parallel && n_grains > 1) {
      const int64_t n_tasks = std::min<int64_t>(pool.n_threads(), n_grains);
      pool.parallel_for(n_tasks, [&](int64_t task) {
        const int64_t t0 = std::min(n_vis, n_grains * task / n_tasks * kKeysPerGrain);
        const int64_t t1 = std::min(n_vis, n_grains * (task + 1) / n_tasks * kKeysPerGrain);
        scores_range(isa, a, i, t0, t1, row);
      });
    } else {
      scores_range(isa, a, i, 0, n_vis, row);
    }
    if (a.scores != nullptr) std::fill(row + n_vis, row + a.n_keys, -std::numeric_limits<float>::infinity());
    if (a.top_idx != nullptr) {
      int32_t* out = a.top_idx + i * a.top_k;
      const int64_t k = std::min(a.top_k, n_vis);
      if (k > 0) topk(isa, row, n_vis, k, out, nullptr);
      std::fill(out + k, out + a.top_k, -1);
    }
  };
  if (split_keys) {
    for (int64_t i = 0; i < a.n_q; ++i) one_query(i, true);
  } else {
    pool.parallel_for(a.n_q, [&](int64_t i) { one_query(i, false); });
  }
}

}  // namespace ds
