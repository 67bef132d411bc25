// AVX-512 instantiation of x86/v4_attention_impl.h (16 f32 lanes).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/x86/avx512/v4_attention_avx512.h"

#include <immintrin.h>

#include "kernels/x86/avx512/exp_avx512.h"
#include "kernels/x86/v4_attention_impl.h"

namespace ds::avx512 {
namespace {

struct Vec16 {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr int kLanes = 16;
  static Mask mask(int64_t remaining) {
    return remaining >= 16 ? static_cast<Mask>(0xFFFF) : static_cast<Mask>((1u << remaining) - 1u);
  }
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_masked(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store_masked(float* p, Mask m, V v) { _mm512_mask_storeu_ps(p, m, v); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  // max(x, m) as the reference's `x > m ? x : m` (NaN in x is skipped, as there).
  static V max_nan(V x, V m) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, m, _CMP_GT_OQ), m, x); }
  static V exp(V x) { return exp_ps(x); }
  // Fixed tree: (l + l+8), (l + l+4), (l + l+2), (l + l+1).
  static float reduce_add(V v) {
    const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
};

}  // namespace

void compressor_entry(const CompressorArgs& a, int64_t entry) { x86_v4::compressor_entry<Vec16>(a, entry); }
void indexer_scores_range(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end,
                          float* scores_row) {
  x86_v4::indexer_scores_range<Vec16>(a, i, t_begin, t_end, scores_row);
}
void sparse_attention_heads(const SparseAttentionArgs& a, int64_t i, int32_t h_begin, int32_t h_end,
                            float* scratch) {
  x86_v4::sparse_attention_heads<Vec16>(a, i, h_begin, h_end, scratch);
}

}  // namespace ds::avx512
