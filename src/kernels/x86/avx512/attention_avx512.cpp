// GCC 12 reports its own AVX-512 intrinsics (their _mm512_undefined_* operands) as possibly
// uninitialised at -O3 (GCC PR 105593); the pragma must precede the first <immintrin.h>.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels/x86/avx512/attention_avx512.h"

#include "kernels/x86/attention_impl.h"
#include "kernels/x86/avx512/vec_avx512.h"

namespace ds::avx512 {
void mla_attention_absorbed(ThreadPool& pool, const MlaAbsorbedArgs& a) {
  x86_attention::mla_absorbed<Vec16>(pool, a);
}

void mha_attention(ThreadPool& pool, const MhaArgs& a) { x86_attention::mha<Vec16>(pool, a); }

}  // namespace ds::avx512
