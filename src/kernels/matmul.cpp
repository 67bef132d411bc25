// matmul dispatch: plan (pure) -> per-ISA single-threaded kernels over output-column ranges.
#include "kernels/matmul.h"

#include <algorithm>

#include "base/aligned_buffer.h"
#include "base/assert.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul_bf16x.h"

namespace ds {
namespace {

// Below this many multiply-adds a call runs on the calling thread: waking the pool costs more
// (tens of microseconds) than the work.
constexpr int64_t kMinFmasPerTask = int64_t{1} << 16;

}  // namespace

MatmulPlan plan_matmul(Isa isa, int64_t m, const WeightMatrix& w, int n_threads) {
  MatmulPlan plan;
  plan.isa = isa;
  const KernelTable& table = kernel_table(isa);
  plan.tile_m = m == 1 ? 1 : table.gemm_tile_m;
  plan.tile_n = m == 1 ? table.gemv_tile_n : table.gemm_tile_n;
  plan.n_grain = plan.tile_n;
  if (m <= 0 || w.rows <= 0) {
    plan.n_tasks = 0;
    return plan;
  }
  const int64_t n_grains = (w.rows + plan.n_grain - 1) / plan.n_grain;
  const int64_t fmas = m * w.rows * std::max<int64_t>(w.cols, 1);
  const int64_t by_work = std::max<int64_t>(1, fmas / kMinFmasPerTask);
  plan.n_tasks = static_cast<int>(std::min<int64_t>({std::max(n_threads, 1), n_grains, by_work}));
  return plan;
}

ColumnRange plan_task_range(const MatmulPlan& plan, int64_t rows, int task_idx) {
  if (plan.n_tasks <= 0) return {};
  const int64_t n_grains = (rows + plan.n_grain - 1) / plan.n_grain;
  const int64_t g0 = n_grains * task_idx / plan.n_tasks;
  const int64_t g1 = n_grains * (task_idx + 1) / plan.n_tasks;
  return {std::min(rows, g0 * plan.n_grain), std::min(rows, g1 * plan.n_grain)};
}

void matmul_cols(Isa isa, const MatmulArgs& args, int64_t n_begin, int64_t n_end) {
  if (args.m <= 0 || n_begin >= n_end) return;
  // The weight loader validates block shapes and scales; a bad descriptor here is a bug.
  DS_ASSERT(args.w->format != WeightFormat::fp8_e4m3_block ||
                (args.w->scales != nullptr && args.w->block_rows > 0 && args.w->block_cols > 0),
            "fp8 weight without scales or with an empty block shape");
  DS_ASSERT(args.w->format != WeightFormat::fp4_e2m1_block ||
                (args.w->scales_e8m0 != nullptr && args.w->block_rows == 1 && args.w->block_cols == 32 &&
                 args.w->cols % 32 == 0),
            "fp4 weight without E8M0 scales, with a block other than 1x32 or cols not a multiple of 32");
  const KernelTable& table = kernel_table(isa);
  if (args.bf16_activations && bf16_activations_apply(args.w->format))
    return table.matmul_cols_bf16x(args, n_begin, n_end);
  table.matmul_cols(args, n_begin, n_end);
}

void round_rows_to_bf16(Isa isa, const float* x, int64_t m, int64_t ldx, int64_t cols, uint16_t* out) {
  kernel_table(isa).round_rows_bf16(x, m, ldx, cols, out);
}

void matmul(Isa isa, ThreadPool& pool, const MatmulArgs& in) {
  DS_ASSERT(in.w != nullptr, "matmul without a weight matrix");
  const MatmulPlan plan = plan_matmul(isa, in.m, *in.w, pool.n_threads());
  if (plan.n_tasks == 0) return;
  if (plan.n_tasks == 1) {
    matmul_cols(isa, in, 0, in.w->rows);
    return;
  }
  // bf16 activations: x rounded once for every task instead of once per task.
  MatmulArgs args = in;
  AlignedBuffer<uint16_t> xb;
  if (args.bf16_activations && bf16_activations_apply(args.w->format) && args.x_bf16 == nullptr) {
    xb.resize(static_cast<size_t>(args.m * args.w->cols));
    round_rows_to_bf16(isa, args.x, args.m, args.ldx, args.w->cols, xb.data());
    args.x_bf16 = xb.data();
  }
  pool.parallel_for(plan.n_tasks, [&](int64_t task_idx) {
    const ColumnRange r = plan_task_range(plan, args.w->rows, static_cast<int>(task_idx));
    matmul_cols(isa, args, r.begin, r.end);
  });
}

}  // namespace ds
