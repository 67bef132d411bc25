#include "kernels/attention.h"

#include "kernels/ref/attention_ref.h"
#include "kernels/x86/avx2/attention_avx2.h"
#include "kernels/x86/avx512/attention_avx512.h"

namespace ds {

void mla_attention_absorbed(Isa isa, ThreadPool& pool, const MlaAbsorbedArgs& a) {
  if (a.n_q <= 0 || a.n_heads <= 0) return;
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
