// GCC 12 reports its own AVX-512 intrinsics (their _mm512_undefined_* operands) as possibly
// uninitialised at -O3 (GCC PR 105593); the pragma must precede the first <immintrin.h>.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include "kernels/x86/avx512/ops_avx512.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/x86/avx512/exp_avx512.h"
#include "kernels/x86/mhc_mix_impl.h"

namespace ds::avx512 {
namespace {

__mmask16 tail_mask(int64_t remaining) {
  return remaining >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << remaining) - 1u);
}

// Horizontal sums through memory: GCC 12's _mm512_reduce_add_pd trips -Wuninitialized
// (an _mm256_undefined_pd inside _mm512_extractf64x4_pd).
double hsum(__m512d v) {
  alignas(64) double lanes[8];
  _mm512_store_pd(lanes, v);
  return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}

// Adds the squares of 16 f32 (as f64, where they are exact) into two accumulators.
void add_squares(__m512 v, __m512d& acc_lo, __m512d& acc_hi) {
  const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
  const __m512d hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1));
  acc_lo = _mm512_fmadd_pd(lo, lo, acc_lo);
  acc_hi = _mm512_fmadd_pd(hi, hi, acc_hi);
}

void add_values(__m512 v, __m512d& acc_lo, __m512d& acc_hi) {
  acc_lo = _mm512_add_pd(acc_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
  acc_hi = _mm512_add_pd(acc_hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
}

// f32 bits -> bf16 bits (in the top half), ties to even; NaN quieted, as tensor/dtype.h.
__m256i bf16_round_bits(__m256i bits) {
  const __m256i abs = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __mmask8 nan = _mm256_cmpgt_epi32_mask(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x400000));
  return _mm256_and_si256(_mm256_mask_blend_epi32(nan, rounded, quiet),
                          _mm256_set1_epi32(static_cast<int>(0xffff0000u)));
}

// 8 doubles rounded once: to f32 (nearest even), or to bf16 through f32 rounded to odd
// (truncate, then set the last bit when inexact).
__m256 round_f64x8(__m512d v, bool to_bf16) {
  if (!to_bf16) return _mm512_cvtpd_ps(v);
  const __m256 truncated = _mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask8 inexact = _mm512_cmp_pd_mask(_mm512_cvtps_pd(truncated), v, _CMP_NEQ_UQ);
  __m256i bits = _mm256_castps_si256(truncated);
  bits = _mm256_mask_or_epi32(bits, inexact, bits, _mm256_set1_epi32(1));
  return _mm256_castsi256_ps(bf16_round_bits(bits));
}

}  // namespace

void rmsnorm(const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps, float* y,
             int64_t ldy) {
  if (dim <= 0) return;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy;
    __m512d acc_lo = _mm512_setzero_pd(), acc_hi = _mm512_setzero_pd();
    for (int64_t i = 0; i < dim; i += 16) {
      const __m512 v = _mm512_maskz_loadu_ps(tail_mask(dim - i), xr + i);
      add_squares(v, acc_lo, acc_hi);
    }
    const double sum_sq = hsum(_mm512_add_pd(acc_lo, acc_hi));
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    const __m512 rv = _mm512_set1_ps(inv_rms);
    for (int64_t i = 0; i < dim; i += 16) {
      const __mmask16 m = tail_mask(dim - i);
      __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, xr + i), rv);
      if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
      _mm512_mask_storeu_ps(yr + i, m, v);
    }
  }
}

void rmsnorm_f64(const float* x, int64_t n_rows, int64_t dim, const float* w, double eps, bool to_bf16,
                 float* y) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum_sq = 0;  // index order, as the reference: it decides inv_rms's last bits
    for (int64_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const __m512d inv_rms = _mm512_set1_pd(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    for (int64_t i = 0; i < dim; i += 8) {
      const __mmask8 m =
          dim - i >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << (dim - i)) - 1u);
      const __m512d xv = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, xr + i));
      const __m512d wv = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, w + i));
      _mm256_mask_storeu_ps(yr + i, m, round_f64x8(_mm512_mul_pd(wv, _mm512_mul_pd(xv, inv_rms)), to_bf16));
    }
  }
}

namespace {

__mmask8 tail_mask8(int64_t remaining) {
  return remaining >= 8 ? static_cast<__mmask8>(0xff) : static_cast<__mmask8>((1u << remaining) - 1u);
}

// mhc_mix's sums for outputs [o0, o_end), o_end - o0 <= 8·Q, in Q vectors of 8 (the last masked),
// i ascending: the reference's order per output. kSquares: also the index-order sum of squares,
// whose scalar chain overlaps the vector work.
struct MixPath {
  static constexpr int kLanes = 8;
  template <int Q, bool kSquares>
  static double block(const float* fn_t, int64_t n, int64_t n_out, int64_t o0, int64_t o_end, const float* v,
                      double* sums) {
    __m512d acc[Q];
    __mmask8 m[Q];
    for (int q = 0; q < Q; ++q) {
      acc[q] = _mm512_setzero_pd();
      m[q] = tail_mask8(o_end - o0 - 8 * q);
    }
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* w = fn_t + i * n_out + o0;
      const __m512d vi = _mm512_set1_pd(static_cast<double>(v[i]));
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q) {
        const __m512d wq = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m[q], w + 8 * q));
        acc[q] = _mm512_add_pd(acc[q], _mm512_mul_pd(wq, vi));
      }
      if constexpr (kSquares) ss += static_cast<double>(v[i]) * v[i];
    }
    for (int q = 0; q < Q; ++q) _mm512_mask_storeu_pd(sums + o0 + 8 * q, m[q], acc[q]);
    return ss;
  }
};

}  // namespace

void mhc_mix(const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps, double* mixes) {
  x86_mhc::mhc_mix<MixPath>(fn_t, n, n_out, v, eps, mixes);
}

void mhc_collapse(const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                  float* x) {
  for (int64_t c = 0; c < hidden; c += 8) {
    const __mmask8 m = tail_mask8(hidden - c);
    __m512d acc = _mm512_setzero_pd();
    for (int64_t k = 0; k < hc; ++k) {
      const __m512d s = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, streams + k * hidden + c));
      acc = _mm512_add_pd(acc, _mm512_mul_pd(_mm512_set1_pd(pre[k]), s));
    }
    _mm256_mask_storeu_ps(x + c, m, round_f64x8(acc, to_bf16));
  }
}

void mhc_expand(const float* streams, const float* f, const double* post, const double* comb, int64_t hc,
                int64_t hidden, bool to_bf16, float* out) {
  for (int64_t j = 0; j < hc; ++j) {
    const __m512d pj = _mm512_set1_pd(post[j]);
    for (int64_t c = 0; c < hidden; c += 8) {
      const __mmask8 m = tail_mask8(hidden - c);
      __m512d acc = _mm512_setzero_pd();
      for (int64_t i = 0; i < hc; ++i) {
        const __m512d s = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, streams + i * hidden + c));
        acc = _mm512_add_pd(acc, _mm512_mul_pd(_mm512_set1_pd(comb[i * hc + j]), s));
      }
      const __m512d fv = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(m, f + c));
      _mm256_mask_storeu_ps(out + j * hidden + c, m,
                            round_f64x8(_mm512_add_pd(_mm512_mul_pd(pj, fv), acc), to_bf16));
    }
  }
}

void rope_rotate(float* x, int64_t n_heads, int64_t head_stride, const float* cos_v, const float* sin_v,
                 int64_t n_pairs) {
  // Interleaved tables: cos2 = [c0, c0, c1, c1, ...], sin2 = [−s0, s0, −s1, s1, ...], so that
  // x·cos2 + swap_pairs(x)·sin2 = [re·c − im·s, im·c + re·s]: the reference's products and sums
  // (the sign flip is exact and a + b == b + a), hence the same bits.
  constexpr int64_t kStackPairs = 128;
  float cos_stack[2 * kStackPairs], sin_stack[2 * kStackPairs];
  std::vector<float> heap;
  float* cos2 = cos_stack;
  float* sin2 = sin_stack;
  if (n_pairs > kStackPairs) {
    heap.resize(static_cast<size_t>(4 * n_pairs));
    cos2 = heap.data();
    sin2 = heap.data() + 2 * n_pairs;
  }
  for (int64_t i = 0; i < n_pairs; ++i) {
    cos2[2 * i] = cos2[2 * i + 1] = cos_v[i];
    sin2[2 * i] = -sin_v[i];
    sin2[2 * i + 1] = sin_v[i];
  }
  const int64_t n = 2 * n_pairs;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_stride;
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 m = tail_mask(n - i);
      const __m512 v = _mm512_maskz_loadu_ps(m, xh + i);
      const __m512 swapped = _mm512_permute_ps(v, 0xB1);
      const __m512 a = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, cos2 + i));
      const __m512 b = _mm512_mul_ps(swapped, _mm512_maskz_loadu_ps(m, sin2 + i));
      _mm512_mask_storeu_ps(xh + i, m, _mm512_add_ps(a, b));
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, float limit) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 hi = _mm512_set1_ps(limit);
  const __m512 lo = _mm512_set1_ps(-limit);
  const bool clamp = limit > 0.0f;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    if (clamp) {  // the constant goes first so a NaN operand is what min/max return
      g = _mm512_min_ps(hi, g);
      u = _mm512_max_ps(lo, _mm512_min_ps(hi, u));
    }
    const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
    const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(one, e));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(silu, u));
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  __m512 max_v = _mm512_set1_ps(neg_inf);
  __mmask16 nan_seen = 0;
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), m, x + i);
    nan_seen |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    max_v = _mm512_max_ps(max_v, v);
  }
  if (nan_seen) {
    for (int64_t i = 0; i < n; ++i) x[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  const float max_s = _mm512_reduce_max_ps(max_v);
  if (max_s == neg_inf) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  const __m512 mv = _mm512_set1_ps(max_s);
  __m512d acc_lo = _mm512_setzero_pd(), acc_hi = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    // Masked-off lanes load −inf, whose exponential is exactly 0 and adds nothing.
    const __m512 v = _mm512_mask_loadu_ps(_mm512_set1_ps(neg_inf), m, x + i);
    const __m512 e = exp_ps(_mm512_sub_ps(v, mv));
    add_values(e, acc_lo, acc_hi);
    _mm512_mask_storeu_ps(x + i, m, e);
  }
  const __m512 inv = _mm512_set1_ps(static_cast<float>(1.0 / hsum(_mm512_add_pd(acc_lo, acc_hi))));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv));
  }
}

void exp_f32(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(y + i, m, exp_ps(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace ds::avx512
