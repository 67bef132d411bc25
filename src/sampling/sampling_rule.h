// The arithmetic the fast sampler and the reference sampler share. Probability masses are sums of
// fixed-point integer weights, so they are exact and do not depend on the order of summation: the
// fast path may add whole histogram buckets where the reference adds token by token in rank order,
// and both must still pick the same token bit for bit (reference_sampler_test checks it).
#pragma once

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

namespace ds::sampling_rule {

// Processed logit scaled by 1/T. NaN can never be drawn (-inf); +inf (and overflow of x / T) becomes
// FLT_MAX so that z - z_max stays finite and such tokens share the mass.
inline float scaled_logit(float processed_logit, float temperature) {
  const float z = processed_logit / temperature;
  if (std::isnan(z)) return -INFINITY;
  return z == INFINITY ? FLT_MAX : z;
}

// e^x for x <= 0 in float, Cephes' expf (range reduction by ln 2 and a degree-6 polynomial, about
// 2 ulp), written with no library call and no branch so the loops over the vocabulary vectorise.
// x is clamped to [-87, 88]: any finite x gives a positive normal float (e^-87 for x below -87).
// Deterministic for a given build; the sampler never assumes it is monotone (rank order sorts by
// the weight itself).
inline float exp_approx(float x) {
  constexpr float kRoundShift = 0x1.8p23f;  // adding it rounds to an integer in the low mantissa bits
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float shifted = x * 1.44269504088896341f + kRoundShift;
  const float n = shifted - kRoundShift;  // round(x / ln 2)
  float r = x - n * 0.693359375f;         // ln 2 split into an exact high part and a low part
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t exponent = static_cast<int32_t>(n) + 127;
  const uint32_t scale_bits = static_cast<uint32_t>(exponent) << 23;
  float scale;
  std::memcpy(&scale, &scale_bits, sizeof scale);
  return p * scale;
}

// Unnormalised probability of a survivor (z > -inf), in (0, 1]; exactly 1 for the top token.
inline float weight(float z, float z_max) {
  const float e = exp_approx(z - z_max);  // computed unconditionally so the caller's loop has no branch
  return z == -INFINITY ? 0.0f : e;
}

// Largest value of a row, NaN ignored (-inf if empty or all NaN), in 8 independent lanes so the
// loop can be vectorised; max is exact, so the lane split does not change the result.
inline float max_value(std::span<const float> row) {
  float lane[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  size_t i = 0;
  for (; i + 8 <= row.size(); i += 8) {
    for (size_t k = 0; k < 8; ++k) lane[k] = row[i + k] > lane[k] ? row[i + k] : lane[k];
  }
  for (; i < row.size(); ++i) lane[0] = row[i] > lane[0] ? row[i] : lane[0];
  float m = lane[0];
  for (size_t k = 1; k < 8; ++k) m = lane[k] > m ? lane[k] : m;
  return m;
}

// The weight as an integer with 40 fractional bits (truncated). Exact for w >= 2^-17 and within
// 2^-40 of w below, far under float exp's own relative error of ~1e-7; a token whose weight is under
// 2^-40 of the top token's (z more than 27.7 below the top) gets 0 and cannot be drawn. A sum over
// up to 2^23 tokens fits in uint64.
constexpr int kFixedWeightBits = 40;
constexpr size_t kMaxVocab = size_t{1} << 23;
inline uint64_t fixed_weight(float w) {
  return static_cast<uint64_t>(static_cast<int64_t>(w * 0x1p40f));  // via int64: one instruction
}

// Rank order: descending weight, then descending scaled logit (weights tie when they round to the
// same float), then the lower id. Sorting by the weight itself keeps rank order consistent with the
// weight histogram whatever the exp's rounding, and makes min-p's survivors a rank-order prefix.
struct RankLess {
  std::span<const float> w;  // weights
  std::span<const float> l;  // processed logits (z = scaled_logit(l, temperature))
  float temperature;
  bool operator()(int32_t a, int32_t b) const {
    const size_t ia = static_cast<size_t>(a), ib = static_cast<size_t>(b);
    if (w[ia] != w[ib]) return w[ia] > w[ib];
    const float za = scaled_logit(l[ia], temperature), zb = scaled_logit(l[ib], temperature);
    if (za != zb) return za > zb;
    return a < b;
  }
};

// top-p keeps a token iff the mass ranked before it is below top_p of the candidates' mass.
inline bool below_top_p(uint64_t mass_before, double top_p_mass) {
  return static_cast<double>(mass_before) < top_p_mass;
}

// The draw's target in [0, mass): floor(u · mass) with u = bits / 2^53 from Philox, computed exactly.
inline uint64_t draw_target(double uniform, uint64_t mass) {
  const uint64_t bits = static_cast<uint64_t>(uniform * 0x1p53);  // exact: uniform is bits · 2^-53
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits) * mass) >> 53);
}

// Histogram bucket of a weight in [0, 1]: the float's exponent and 3 mantissa bits. Monotone
// (w1 > w2 implies bucket(w1) >= bucket(w2)), at most 0x3F8 = 1016 for w = 1.
// A survivor's weight is a normal float (exp_approx >= 2^-126), so its bucket is >= 8; a
// non-survivor's weight 0 is bucket 0.
constexpr int kWeightBuckets = 1024;
constexpr int kMinSurvivorBucket = 8;
// Buckets of weights >= 2^-10 (z within 6.9 of the top): the sampler lists their tokens while it
// builds the histogram, so that collecting them needs no further pass over the vocabulary.
constexpr int kListedBucket = (127 - 10) << 3;
inline int weight_bucket(float w) {
  uint32_t bits;
  std::memcpy(&bits, &w, sizeof bits);
  return static_cast<int>(bits >> 20);
}

}  // namespace ds::sampling_rule
