#include "kernels/sparse_attention.h"

#include <algorithm>
#include <vector>

#include "kernels/kernel_table.h"

namespace ds {
namespace {

constexpr int32_t kHeadsPerGrain = 4;  // the x86 paths share key loads across 4 heads

}  // namespace

void sparse_attention(Isa isa, ThreadPool& pool, const SparseAttentionArgs& a) {
  if (a.n_q <= 0 || a.n_heads <= 0) return;
  const int64_t n_slots = a.window.n_idx + a.compressed.n_idx;
  // One task per query (its heads share the key rows in cache); with fewer queries than threads
  // (decode) each query's heads are split into grains of 4 instead. Every (query, head) runs the
  // same arithmetic either way (the x86 head tiles only share loads).
  const int32_t n_head_grains = (a.n_heads + kHeadsPerGrain - 1) / kHeadsPerGrain;
  const bool split_heads = a.n_q < pool.n_threads() && n_head_grains > 1;
  const int64_t n_tasks = split_heads ? a.n_q * n_head_grains : a.n_q;
  const auto heads_fn = kernel_table(isa).sparse_attention_heads;
  pool.parallel_for(n_tasks, [&](int64_t task) {
    std::vector<float> scratch(static_cast<size_t>(kHeadsPerGrain * std::max<int64_t>(1, n_slots)));
    const int64_t i = split_heads ? task / n_head_grains : task;
    const int32_t h0 = split_heads ? static_cast<int32_t>(task % n_head_grains) * kHeadsPerGrain : 0;
    const int32_t h1 = split_heads ? std::min(a.n_heads, h0 + kHeadsPerGrain) : a.n_heads;
    heads_fn(a, i, h0, h1, scratch.data());
  });
}

}  // namespace ds
