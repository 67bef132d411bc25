// AVX-512 Hadamard and quantise-dequantise simulation. Both perform, per element, exactly the
// reference's f32 operations (see kernels/hadamard.h, kernels/quant_sim.h), so they match it bit
// for bit; the vectors only decide which elements are processed together.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "kernels/x86/avx512/v4_rows_avx512.h"

#include <immintrin.h>

#include <limits>

namespace ds::avx512 {
namespace {

constexpr int kLanes = 16;

// Butterfly stage with span h < 16 inside one vector: lane j (bit h clear) gets a + b, lane j + h
// gets a − b, where a = v[j], b = v[j + h]; `partner` is v with lanes j and j ^ h swapped.
template <int H>
inline __m512 stage_in_vector(__m512 v) {
  __m512 partner;
  __mmask16 upper;
  if constexpr (H == 1) {
    partner = _mm512_permute_ps(v, 0xB1);
    upper = 0xAAAA;
  } else if constexpr (H == 2) {
    partner = _mm512_permute_ps(v, 0x4E);
    upper = 0xCCCC;
  } else if constexpr (H == 4) {
    partner = _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1));
    upper = 0xF0F0;
  } else {
    partner = _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2));
    upper = 0xFF00;
  }
  // Lower lanes: v + partner = a + b; upper lanes: partner − v = a − b.
  return _mm512_mask_blend_ps(upper, _mm512_add_ps(v, partner), _mm512_sub_ps(partner, v));
}

}  // namespace

void hadamard_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, float scale) {
  const __m512 vscale = _mm512_set1_ps(scale);
  for (int64_t r = 0; r < n_rows; ++r) {
    float* row = x + r * ld;  // row: [n]
    // Spans 1..8 (the first four stages) act inside each 16-lane vector, in order.
    for (int64_t c = 0; c < n; c += kLanes) {
      __m512 v = _mm512_loadu_ps(row + c);
      v = stage_in_vector<1>(v);
      v = stage_in_vector<2>(v);
      v = stage_in_vector<4>(v);
      v = stage_in_vector<8>(v);
      _mm512_storeu_ps(row + c, v);
    }
    // Spans 16, 32, ...: whole vectors pair up.
    for (int64_t h = kLanes; h < n; h *= 2) {
      for (int64_t i = 0; i < n; i += 2 * h) {
        for (int64_t j = i; j < i + h; j += kLanes) {
          const __m512 a = _mm512_loadu_ps(row + j);
          const __m512 b = _mm512_loadu_ps(row + j + h);
          _mm512_storeu_ps(row + j, _mm512_add_ps(a, b));
          _mm512_storeu_ps(row + j + h, _mm512_sub_ps(a, b));
        }
      }
    }
    for (int64_t c = 0; c < n; c += kLanes)
      _mm512_storeu_ps(row + c, _mm512_mul_ps(_mm512_loadu_ps(row + c), vscale));
  }
}

void quant_sim_rows(float* x, int64_t n_rows, int64_t n, int64_t ld, const QuantSimSpec& spec) {
  const bool fp8 = spec.grid == QuantGrid::fp8_e4m3;
  const __m512 grid_max = _mm512_set1_ps(fp8 ? 448.0f : 6.0f);
  const __m512 grid_min = _mm512_set1_ps(fp8 ? -448.0f : -6.0f);
  // Quantum of |q| in [2^e, 2^(e+1)): 2^(max(e, e_min) − mantissa bits).
  const __m512 e_min = _mm512_set1_ps(fp8 ? -6.0f : 0.0f);
  const __m512 mant_bits = _mm512_set1_ps(fp8 ? 3.0f : 1.0f);
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512 finite_max = _mm512_set1_ps(std::numeric_limits<float>::max());
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t b0 = 0; b0 < n; b0 += spec.block) {
      float* blk = x + r * ld + b0;  // blk: [block]
      __m512 amax = _mm512_setzero_ps();
      __mmask16 non_finite = 0;
      for (int32_t i = 0; i < spec.block; i += kLanes) {
        const __m512 a = _mm512_and_ps(_mm512_loadu_ps(blk + i), abs_mask);
        non_finite |= _mm512_cmp_ps_mask(a, finite_max, _CMP_NLE_UQ);  // > max or NaN
        amax = _mm512_max_ps(amax, a);
      }
      if (non_finite != 0) {
        const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
        for (int32_t i = 0; i < spec.block; i += kLanes) _mm512_storeu_ps(blk + i, nan);
        continue;
      }
      const __m512 s = _mm512_set1_ps(quant_sim_block_scale(spec, _mm512_reduce_max_ps(amax)));
      for (int32_t i = 0; i < spec.block; i += kLanes) {
        __m512 q = _mm512_div_ps(_mm512_loadu_ps(blk + i), s);
        q = _mm512_max_ps(grid_min, _mm512_min_ps(grid_max, q));
        // getexp(0) = −inf, lifted to e_min by the max; scalef by ±(e − bits) is exact.
        const __m512 shift = _mm512_sub_ps(_mm512_max_ps(_mm512_getexp_ps(q), e_min), mant_bits);
        const __m512 scaled = _mm512_scalef_ps(q, _mm512_sub_ps(_mm512_setzero_ps(), shift));
        const __m512 rounded = _mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm512_storeu_ps(blk + i, _mm512_mul_ps(_mm512_scalef_ps(rounded, shift), s));
      }
    }
  }
}

}  // namespace ds::avx512
