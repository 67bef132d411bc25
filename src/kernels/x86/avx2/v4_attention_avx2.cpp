// AVX2 instantiation of x86/v4_attention_impl.h (8 f32 lanes).
#include "kernels/x86/avx2/v4_attention_avx2.h"

#include <immintrin.h>

#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/v4_attention_impl.h"

namespace ds::avx2 {
namespace {

struct Vec8 {
  using V = __m256;
  using Mask = __m256i;
  static constexpr int kLanes = 8;
  static Mask mask(int64_t remaining) {
    const int n = remaining >= 8 ? 8 : static_cast<int>(remaining);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_masked(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store_masked(float* p, Mask m, V v) { _mm256_maskstore_ps(p, m, v); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V max_nan(V x, V m) { return _mm256_blendv_ps(m, x, _mm256_cmp_ps(x, m, _CMP_GT_OQ)); }
  static V exp(V x) { return exp_ps(x); }
  // Fixed tree: (l + l+4), (l + l+2), (l + l+1).
  static float reduce_add(V v) {
    const __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
    return _mm_cvtss_f32(_mm_add_ss(c, _mm_movehdup_ps(c)));
  }
};

}  // namespace

void compressor_entry(const CompressorArgs& a, int64_t entry) { x86_v4::compressor_entry<Vec8>(a, entry); }
void indexer_scores_range(const IndexerArgs& a, int64_t i, int64_t t_begin, int64_t t_end,
                          float* scores_row) {
  x86_v4::indexer_scores_range<Vec8>(a, i, t_begin, t_end, scores_row);
}
void sparse_attention_heads(const SparseAttentionArgs& a, int64_t i, int32_t h_begin, int32_t h_end,
                            float* scratch) {
  x86_v4::sparse_attention_heads<Vec8>(a, i, h_begin, h_end, scratch);
}

}  // namespace ds::avx2
