// AVX2 Hadamard and quantise-dequantise simulation. Both perform, per element, exactly the
// reference's f32 operations (see kernels/hadamard.h, kernels/quant_sim.h), so they match it bit
// for bit; the vectors only decide which elements are processed together.
#include "kernels/x86/avx2/v4_rows_avx2.h"

#include <immintrin.h>

#include <limits>

namespace ds::avx2 {
namespace {

constexpr int kLanes = 8;

// Butterfly stage with span h < 8 inside one vector (see the AVX-512 file): lower lanes get
// v + partner = a + b, upper lanes partner − v = a − b.
template <int H>
inline __m256 stage_in_vector(__m256 v) {
  if constexpr (H == 1) {
    const __m256 p = _mm256_permute_ps(v, 0xB1);
    return _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xAA);
  } else if constexpr (H == 2) {
    const __m256 p = _mm256_permute_ps(v, 0x4E);
    return _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xCC);
  } else {
    const __m256 p = _mm256_permute2f128_ps(v, v, 0x01);
    return _mm256_blend_ps(_mm256_add_ps(v, p), _mm256_sub_ps(p, v), 0xF0);
  }
}

// 2^k for integer lanes k in the normal range (exact).
inline __m256 pow2(__m256i k) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

}  // namespace

void hadamard_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) {
  const __m256 vscale = _mm256_set1_ps(scale);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * ld;  // row: [n]
    for (int64_t c = 0; c < n; c += kLanes) {
      __m256 v = _mm256_loadu_ps(row + c);
      v = stage_in_vector<1>(v);
      v = stage_in_vector<2>(v);
      v = stage_in_vector<4>(v);
      _mm256_storeu_ps(row + c, v);
    }
    for (int64_t h = kLanes; h < n; h *= 2) {
      for (int64_t i = 0; i < n; i += 2 * h) {
        for (int64_t j = i; j < i + h; j += kLanes) {
          const __m256 a = _mm256_loadu_ps(row + j);
          const __m256 b = _mm256_loadu_ps(row + j + h);
          _mm256_storeu_ps(row + j, _mm256_add_ps(a, b));
          _mm256_storeu_ps(row + j + h, _mm256_sub_ps(a, b));
        }
      }
    }
    for (int64_t c = 0; c < n; c += kLanes)
      _mm256_storeu_ps(row + c, _mm256_mul_ps(_mm256_loadu_ps(row + c), vscale));
  }
}

void quant_sim_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec) {
  const bool fp8 = spec.grid == QuantGrid::fp8_e4m3;
  const __m256 grid_max = _mm256_set1_ps(fp8 ? 448.0f : 6.0f);
  const __m256 grid_min = _mm256_set1_ps(fp8 ? -448.0f : -6.0f);
  const __m256i e_min = _mm256_set1_epi32(fp8 ? -6 : 0);
  const __m256i mant_bits = _mm256_set1_epi32(fp8 ? 3 : 1);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256 finite_max = _mm256_set1_ps(std::numeric_limits<float>::max());
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b0 = 0; b0 < n; b0 += spec.block) {
      float* blk = x + r * ld + b0;  // blk: [block]
      __m256 amax = _mm256_setzero_ps();
      int non_finite = 0;
      for (int32_t i = 0; i < spec.block; i += kLanes) {
        const __m256 a = _mm256_and_ps(_mm256_loadu_ps(blk + i), abs_mask);
        non_finite |= _mm256_movemask_ps(_mm256_cmp_ps(a, finite_max, _CMP_NLE_UQ));  // > max or NaN
        amax = _mm256_max_ps(amax, a);
      }
      if (non_finite != 0) {
        const __m256 nan = _mm256_set1_ps(std::numeric_limits<float>::quiet_NaN());
        for (int32_t i = 0; i < spec.block; i += kLanes) _mm256_storeu_ps(blk + i, nan);
        continue;
      }
      alignas(32) float lanes[kLanes];
      _mm256_store_ps(lanes, amax);
      float amax_s = 0.0f;
      for (float v : lanes) amax_s = v > amax_s ? v : amax_s;
      const __m256 s = _mm256_set1_ps(quant_sim_block_scale(spec, amax_s));
      for (int32_t i = 0; i < spec.block; i += kLanes) {
        __m256 q = _mm256_div_ps(_mm256_loadu_ps(blk + i), s);
        q = _mm256_max_ps(grid_min, _mm256_min_ps(grid_max, q));
        // Exponent field − 127 (−127 for zero and f32 subnormals, lifted to e_min by the max).
        const __m256i e = _mm256_sub_epi32(
            _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(q), 23), _mm256_set1_epi32(0xff)),
            _mm256_set1_epi32(127));
        const __m256i shift = _mm256_sub_epi32(_mm256_max_epi32(e, e_min), mant_bits);
        const __m256 scaled = _mm256_mul_ps(q, pow2(_mm256_sub_epi32(_mm256_setzero_si256(), shift)));
        const __m256 rounded = _mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_storeu_ps(blk + i, _mm256_mul_ps(_mm256_mul_ps(rounded, pow2(shift)), s));
      }
    }
  }
}

}  // namespace ds::avx2
