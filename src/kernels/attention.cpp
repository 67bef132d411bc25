#include "kernels/attention.h"

#include <algorithm>

#include "kernels/ref/attention_ref.h"
#include "kernels/x86/avx2/attention_avx2.h"
#include "kernels/x86/avx512/attention_avx512.h"

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
  switch (isa) {
    case Isa::avx512:
      return avx512::mla_attention_absorbed(pool, a);
    case Isa::avx2:
      return avx2::mla_attention_absorbed(pool, a);
    case Isa::reference:
      return ref::mla_attention_absorbed(pool, a);
  }
}

void mha_attention(Isa isa, ThreadPool& pool, const MhaArgs& a) {
  if (a.n_q <= 0 || a.n_heads <= 0) return;
  switch (isa) {
    case Isa::avx512:
      return avx512::mha_attention(pool, a);
    case Isa::avx2:
      return avx2::mha_attention(pool, a);
    case Isa::reference:
      return ref::mha_attention(pool, a);
  }
}

}  // namespace ds
