#include "kernels/attention.h"

#include "kernels/kernel_table.h"

#include <algorithm>

namespace ds {

void mla_attention_absorbed(Isa isa, ThreadPool& pool, const MlaAbsorbedArgs& args) {
  if (args.n_q <= 0 || args.n_heads <= 0) return;
  // The paths read paged rows only; a contiguous cache becomes one block holding every row.
  MlaAbsorbedArgs a = args;
  const float* one_block = args.cache;
  if (a.block_rows == nullptr) {
    a.block_rows = &one_block;
    a.block_size = std::max<int64_t>(a.n_ctx, 1);
  }
  kernel_table(isa).mla_attention_absorbed(pool, a);
}

void mha_attention(Isa isa, ThreadPool& pool, const MhaArgs& a) {
  if (a.n_q <= 0 || a.n_heads <= 0) return;
  kernel_table(isa).mha_attention(pool, a);
}

}  // namespace ds
