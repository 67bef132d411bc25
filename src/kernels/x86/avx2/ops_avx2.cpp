#include "kernels/x86/avx2/ops_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/x86/avx2/exp_avx2.h"
#include "kernels/x86/mhc_mix_impl.h"

namespace ds::avx2 {
namespace {

// Lane mask for a tail of `remaining` elements (all lanes when remaining ≥ 8).
__m256i tail_mask(int64_t remaining) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int r = remaining >= 8 ? 8 : static_cast<int>(remaining);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(r), lane);
}

__m256 load(const float* p, __m256i m, int64_t remaining) {
  return remaining >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

void store(float* p, __m256i m, int64_t remaining, __m256 v) {
  if (remaining >= 8) {
    _mm256_storeu_ps(p, v);
  } else {
    _mm256_maskstore_ps(p, m, v);
  }
}

double hsum(__m256d v) {
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, v);
  return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

// f32 bits -> bf16 bits (in the top half), ties to even; NaN quieted, as tensor/dtype.h.
__m128i bf16_round_bits(__m128i bits) {
  const __m128i abs = _mm_and_si128(bits, _mm_set1_epi32(0x7fffffff));
  const __m128i nan = _mm_cmpgt_epi32(abs, _mm_set1_epi32(0x7f800000));
  const __m128i lsb = _mm_and_si128(_mm_srli_epi32(bits, 16), _mm_set1_epi32(1));
  const __m128i rounded = _mm_add_epi32(bits, _mm_add_epi32(_mm_set1_epi32(0x7fff), lsb));
  const __m128i quiet = _mm_or_si128(bits, _mm_set1_epi32(0x400000));
  return _mm_and_si128(_mm_blendv_epi8(rounded, quiet, nan), _mm_set1_epi32(static_cast<int>(0xffff0000u)));
}

// The low 32 bits of each 64-bit lane mask, packed into 4 lanes.
__m128i pack_mask(__m256d m) {
  const __m256i picked =
      _mm256_permutevar8x32_epi32(_mm256_castpd_si256(m), _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
  return _mm256_castsi256_si128(picked);
}

// 4 doubles rounded once: to f32 (nearest even), or to bf16 through f32 rounded to odd: the
// nearest f32, moved one step toward zero where that overshot |v| (giving the truncation), then
// the last bit set where inexact.
__m128 round_f64x4(__m256d v, bool to_bf16) {
  const __m128 nearest = _mm256_cvtpd_ps(v);
  if (!to_bf16) return nearest;
  const __m256d back = _mm256_cvtps_pd(nearest);
  const __m256d sign = _mm256_set1_pd(-0.0);
  const __m128i inexact = pack_mask(_mm256_cmp_pd(back, v, _CMP_NEQ_UQ));
  const __m128i overshot =
      pack_mask(_mm256_cmp_pd(_mm256_andnot_pd(sign, back), _mm256_andnot_pd(sign, v), _CMP_GT_OQ));
  __m128i bits = _mm_add_epi32(_mm_castps_si128(nearest), overshot);  // overshot lanes are -1
  bits = _mm_or_si128(bits, _mm_and_si128(inexact, _mm_set1_epi32(1)));
  return _mm_castsi128_ps(bf16_round_bits(bits));
}

}  // namespace

void rmsnorm(const float* x, int64_t n_rows, int64_t dim, int64_t ldx, const float* w, float eps, float* y,
             int64_t ldy) {
  if (dim <= 0) return;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * ldx;
    float* yr = y + r * ldy;
    __m256d acc_lo = _mm256_setzero_pd(), acc_hi = _mm256_setzero_pd();
    for (int64_t i = 0; i < dim; i += 8) {
      const __m256 v = load(xr + i, tail_mask(dim - i), dim - i);  // masked lanes read as 0
      const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
      const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
      acc_lo = _mm256_fmadd_pd(lo, lo, acc_lo);
      acc_hi = _mm256_fmadd_pd(hi, hi, acc_hi);
    }
    const double sum_sq = hsum(_mm256_add_pd(acc_lo, acc_hi));
    const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps));
    const __m256 rv = _mm256_set1_ps(inv_rms);
    for (int64_t i = 0; i < dim; i += 8) {
      const __m256i m = tail_mask(dim - i);
      __m256 v = _mm256_mul_ps(load(xr + i, m, dim - i), rv);
      if (w) v = _mm256_mul_ps(v, load(w + i, m, dim - i));
      store(yr + i, m, dim - i, v);
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
    const double inv = 1.0 / std::sqrt(sum_sq / static_cast<double>(dim) + eps);
    const __m256d inv_rms = _mm256_set1_pd(inv);
    int64_t i = 0;
    for (; i + 4 <= dim; i += 4) {
      const __m256d xv = _mm256_cvtps_pd(_mm_loadu_ps(xr + i));
      const __m256d wv = _mm256_cvtps_pd(_mm_loadu_ps(w + i));
      _mm_storeu_ps(yr + i, round_f64x4(_mm256_mul_pd(wv, _mm256_mul_pd(xv, inv_rms)), to_bf16));
    }
    for (; i < dim; ++i) {  // tail through the same vector rounding, one lane used
      const __m256d v = _mm256_set1_pd(static_cast<double>(w[i]) * (xr[i] * inv));
      yr[i] = _mm_cvtss_f32(round_f64x4(v, to_bf16));
    }
  }
}

namespace {

// Lanes [0, remaining) of 4, as maskload/maskstore masks.
__m128i tail_mask4(int64_t remaining) {
  return _mm_cmpgt_epi32(_mm_set1_epi32(static_cast<int>(std::min<int64_t>(remaining, 4))),
                         _mm_setr_epi32(0, 1, 2, 3));
}

__m256d load4_pd(const float* p, __m128i m) { return _mm256_cvtps_pd(_mm_maskload_ps(p, m)); }

// mhc_mix's sums for outputs [o0, o_end), o_end - o0 <= 4·Q, in Q vectors of 4 (the last masked),
// i ascending: the reference's order per output. kSquares: also the index-order sum of squares,
// whose scalar chain overlaps the vector work.
struct MixPath {
  static constexpr int kLanes = 4;
  template <int Q, bool kSquares>
  static double block(const float* fn_t, int64_t n, int64_t n_out, int64_t o0, int64_t o_end, const float* v,
                      double* sums) {
    __m256d acc[Q];
    __m128i m[Q];
    for (int q = 0; q < Q; ++q) {
      acc[q] = _mm256_setzero_pd();
      m[q] = tail_mask4(o_end - o0 - 4 * q);
    }
    double ss = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* w = fn_t + i * n_out + o0;
      const __m256d vi = _mm256_set1_pd(static_cast<double>(v[i]));
#pragma GCC unroll 4
      for (int q = 0; q < Q; ++q)
        acc[q] = _mm256_add_pd(acc[q], _mm256_mul_pd(load4_pd(w + 4 * q, m[q]), vi));
      if constexpr (kSquares) ss += static_cast<double>(v[i]) * v[i];
    }
    for (int q = 0; q < Q; ++q) {
      alignas(32) double lanes[4];
      _mm256_store_pd(lanes, acc[q]);
      for (int64_t l = 0; l < std::min<int64_t>(4, o_end - o0 - 4 * q); ++l) sums[o0 + 4 * q + l] = lanes[l];
    }
    return ss;
  }
};

// 4 rounded outputs into p[0, remaining).
void store4(float* p, int64_t remaining, __m128 v) {
  if (remaining >= 4) {
    _mm_storeu_ps(p, v);
  } else {
    _mm_maskstore_ps(p, tail_mask4(remaining), v);
  }
}

}  // namespace

void mhc_mix(const float* fn_t, int64_t n, int64_t n_out, const float* v, double eps, double* mixes) {
  x86_mhc::mhc_mix<MixPath>(fn_t, n, n_out, v, eps, mixes);
}

void mhc_collapse(const float* streams, int64_t hc, int64_t hidden, const double* pre, bool to_bf16,
                  float* x) {
  for (int64_t c = 0; c < hidden; c += 4) {
    const __m128i m = tail_mask4(hidden - c);
    __m256d acc = _mm256_setzero_pd();
    for (int64_t k = 0; k < hc; ++k) {
      acc = _mm256_add_pd(acc, _mm256_mul_pd(_mm256_set1_pd(pre[k]), load4_pd(streams + k * hidden + c, m)));
    }
    store4(x + c, hidden - c, round_f64x4(acc, to_bf16));
  }
}

void mhc_expand(const float* streams, const float* f, const double* post, const double* comb, int64_t hc,
                int64_t hidden, bool to_bf16, float* out) {
  for (int64_t j = 0; j < hc; ++j) {
    const __m256d pj = _mm256_set1_pd(post[j]);
    for (int64_t c = 0; c < hidden; c += 4) {
      const __m128i m = tail_mask4(hidden - c);
      __m256d acc = _mm256_setzero_pd();
      for (int64_t i = 0; i < hc; ++i) {
        const __m256d s = load4_pd(streams + i * hidden + c, m);
        acc = _mm256_add_pd(acc, _mm256_mul_pd(_mm256_set1_pd(comb[i * hc + j]), s));
      }
      const __m256d v = _mm256_add_pd(_mm256_mul_pd(pj, load4_pd(f + c, m)), acc);
      store4(out + j * hidden + c, hidden - c, round_f64x4(v, to_bf16));
    }
  }
}

void rope_rotate(float* x, int64_t n_heads, int64_t head_stride, const float* cos_v, const float* sin_v,
                 int64_t n_pairs) {
  // See the AVX-512 path: interleaved tables make the vector result the reference's bits.
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
    for (int64_t i = 0; i < n; i += 8) {
      const __m256i m = tail_mask(n - i);
      const __m256 v = load(xh + i, m, n - i);
      const __m256 swapped = _mm256_permute_ps(v, 0xB1);
      const __m256 a = _mm256_mul_ps(v, load(cos2 + i, m, n - i));
      const __m256 b = _mm256_mul_ps(swapped, load(sin2 + i, m, n - i));
      store(xh + i, m, n - i, _mm256_add_ps(a, b));
    }
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out, float limit) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 hi = _mm256_set1_ps(limit);
  const __m256 lo = _mm256_set1_ps(-limit);
  const bool clamp = limit > 0.0f;
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    __m256 g = load(gate + i, m, n - i);
    __m256 u = load(up + i, m, n - i);
    if (clamp) {  // the constant goes first so a NaN operand is what min/max return
      g = _mm256_min_ps(hi, g);
      u = _mm256_max_ps(lo, _mm256_min_ps(hi, u));
    }
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    store(out + i, m, n - i, _mm256_mul_ps(silu, u));
  }
}

void softmax(float* x, int64_t n) {
  if (n <= 0) return;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const __m256 neg_inf_v = _mm256_set1_ps(neg_inf);
  __m256 max_v = neg_inf_v;
  __m256 nan_seen = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    const __m256 v = _mm256_blendv_ps(neg_inf_v, load(x + i, m, n - i), _mm256_castsi256_ps(m));
    nan_seen = _mm256_or_ps(nan_seen, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    max_v = _mm256_max_ps(max_v, v);
  }
  if (_mm256_movemask_ps(nan_seen)) {
    for (int64_t i = 0; i < n; ++i) x[i] = std::numeric_limits<float>::quiet_NaN();
    return;
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max_v);
  float max_s = lanes[0];
  for (int l = 1; l < 8; ++l) max_s = lanes[l] > max_s ? lanes[l] : max_s;
  if (max_s == neg_inf) {
    for (int64_t i = 0; i < n; ++i) x[i] = 0.0f;
    return;
  }
  const __m256 mv = _mm256_set1_ps(max_s);
  __m256d acc_lo = _mm256_setzero_pd(), acc_hi = _mm256_setzero_pd();
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    // Masked-off lanes hold −inf, whose exponential is exactly 0 and adds nothing.
    const __m256 v = _mm256_blendv_ps(neg_inf_v, load(x + i, m, n - i), _mm256_castsi256_ps(m));
    const __m256 e = exp_ps(_mm256_sub_ps(v, mv));
    acc_lo = _mm256_add_pd(acc_lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc_hi = _mm256_add_pd(acc_hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    store(x + i, m, n - i, e);
  }
  const __m256 inv = _mm256_set1_ps(static_cast<float>(1.0 / hsum(_mm256_add_pd(acc_lo, acc_hi))));
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    store(x + i, m, n - i, _mm256_mul_ps(load(x + i, m, n - i), inv));
  }
}

void exp_f32(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; i += 8) {
    const __m256i m = tail_mask(n - i);
    store(y + i, m, n - i, exp_ps(load(x + i, m, n - i)));
  }
}

}  // namespace ds::avx2
