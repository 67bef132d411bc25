// Row kernels (rmsnorm, mHC, rope, silu_mul, softmax, top-k): every x86 path against the scalar
// reference over a shape sweep, the reference against double-precision math, the YaRN ramp
// facts from the spec, zero-length rows and NaN/Inf inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/mhc.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "kernels/softmax.h"
#include "kernels/topk.h"
#include "kernels/x86/avx2/ops_avx2.h"
#include "kernels/x86/avx512/ops_avx512.h"

namespace ds {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr double kUlp1 = 1.0 / (1 << 23);  // f32 ulp at 1.0
const std::vector<int64_t> kSizes = {1, 15, 16, 17, 63, 64, 65, 576, 7168};

const char* name_of(Isa isa) { return isa_name(isa).data(); }  // isa_name views literals

std::vector<float> random_vec(int64_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// got ≈ want elementwise: |got − want| ≤ atol + rtol·|want|; NaN and ±Inf must sit at the same
// positions with the same value class. Reports the worst coordinate (by error / allowed).
testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& want, double rtol,
                               double atol, const std::string& what) {
  if (got.size() != want.size()) return testing::AssertionFailure() << what << ": size mismatch";
  double worst_ratio = 0.0;
  size_t worst_i = 0;
  size_t n_special_mismatch = 0;
  size_t first_special_mismatch = 0;
  size_t n_special = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float g = got[i];
    const float w = want[i];
    if (std::isnan(w) || std::isnan(g) || std::isinf(w) || std::isinf(g)) {
      ++n_special;
      const bool same = (std::isnan(w) && std::isnan(g)) || (g == w);
      if (!same && n_special_mismatch++ == 0) first_special_mismatch = i;
      continue;
    }
    const double err = std::fabs(static_cast<double>(g) - w);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(w));
    const double ratio = allowed > 0 ? err / allowed : (err > 0 ? kInf : 0.0);
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      worst_i = i;
    }
  }
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "%s: n=%zu worst i=%zu got=%.9g want=%.9g (err/allowed=%.3g, rtol=%.3g atol=%.3g); "
                "NaN/Inf positions: %zu special, %zu mismatched",
                what.c_str(), got.size(), worst_i, got.empty() ? 0.0 : got[worst_i],
                want.empty() ? 0.0 : want[worst_i], worst_ratio, rtol, atol, n_special, n_special_mismatch);
  if (worst_ratio > 1.0 || n_special_mismatch > 0) {
    auto failure = testing::AssertionFailure() << buf;
    if (n_special_mismatch > 0)
      failure << " (first at i=" << first_special_mismatch << ": got " << got[first_special_mismatch]
              << " want " << want[first_special_mismatch] << ")";
    return failure;
  }
  return testing::AssertionSuccess() << buf;
}

class IsaTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << name_of(GetParam()) << " not supported";
  }
};

// ---------------------------------------------------------------- rmsnorm

// V4's f64 norm: every path must give the reference's bits (same index-order f64 sum, then exact
// f64 products rounded once). Rows of random values at several scales, plus edge rows whose
// outputs land near f32/bf16 ties, in the subnormal range, at overflow, and NaN/±Inf inputs.
TEST_P(IsaTest, RmsnormF64MatchesReferenceBitwise) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> log_scale(-20.0f, 20.0f);
  for (int64_t dim : kSizes) {
    for (int64_t n_rows : {int64_t{1}, int64_t{3}}) {
      std::vector<float> x = random_vec(n_rows * dim, static_cast<uint32_t>(dim * 31 + n_rows));
      std::vector<float> w = random_vec(dim, static_cast<uint32_t>(dim + 5));
      for (auto& v : w) v *= std::exp2(log_scale(rng));  // weights spanning 2^±20: outputs of every magnitude
      if (dim >= 4) {
        w[0] = 3e38f;        // overflows f32 after the scaling
        w[1] = 1e-38f;       // subnormal outputs
        w[2] = kNaN;         // NaN output
        w[3] = -kInf;        // ±Inf (or NaN for a zero input)
        x[1] = 1.00390625f;  // 1 + 2^-8: a bf16 tie before the norm's scaling
      }
      for (bool to_bf16 : {false, true}) {
        std::vector<float> want(x.size()), got(x.size(), -1.0f);
        rmsnorm_f64(Isa::reference, x.data(), n_rows, dim, w.data(), 1e-6, to_bf16, want.data());
        rmsnorm_f64(GetParam(), x.data(), n_rows, dim, w.data(), 1e-6, to_bf16, got.data());
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0)
              << "dim " << dim << " rows " << n_rows << " bf16 " << to_bf16 << " i " << i << ": got "
              << got[i] << " want " << want[i];
        }
      }
    }
  }
}

// ---------------------------------------------------------------- mHC

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }
bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

// Inputs over 2^±12 so that a sum taken in another order, or a product fused into its addition,
// changes low bits (and with them a bf16 or f32 rounding).
std::vector<float> wide_vec(int64_t n, uint32_t seed) {
  std::vector<float> v = random_vec(n, seed);
  std::mt19937 rng(seed ^ 0x5a5a);
  std::uniform_real_distribution<float> log_scale(-12.0f, 12.0f);
  for (auto& x : v) x *= std::exp2(log_scale(rng));
  return v;
}

std::vector<double> wide_doubles(int64_t n, uint32_t seed) {
  const std::vector<float> f = wide_vec(n, seed);
  std::vector<double> d(f.size());
  for (size_t i = 0; i < f.size(); ++i)
    d[i] = static_cast<double>(f[i]) * (1.0 + 1.0 / 3.0);  // not f32-exact
  return d;
}

TEST_P(IsaTest, MhcMixMatchesReferenceBitwise) {
  uint32_t seed = 40;
  for (int64_t n : {int64_t{1}, int64_t{17}, int64_t{64}, int64_t{4096}}) {
    for (int64_t n_out : {int64_t{1}, int64_t{4}, int64_t{7}, int64_t{24}, int64_t{33}, int64_t{40}}) {
      const std::vector<float> fn_t = wide_vec(n * n_out, ++seed);
      std::vector<float> v = wide_vec(n, ++seed);
      std::vector<double> want(static_cast<size_t>(n_out)), got(static_cast<size_t>(n_out), -1.0);
      mhc_mix(Isa::reference, fn_t.data(), n, n_out, v.data(), 1e-6, want.data());
      mhc_mix(GetParam(), fn_t.data(), n, n_out, v.data(), 1e-6, got.data());
      for (int64_t o = 0; o < n_out; ++o) {
        ASSERT_TRUE(same_bits(got[o], want[o]))
            << "n " << n << " n_out " << n_out << " o " << o << ": got " << got[o] << " want " << want[o];
      }
    }
  }
}

TEST_P(IsaTest, MhcCollapseAndExpandMatchReferenceBitwise) {
  uint32_t seed = 90;
  for (int64_t hc : {int64_t{1}, int64_t{4}}) {
    for (int64_t hidden : kSizes) {
      std::vector<float> streams = wide_vec(hc * hidden, ++seed);
      std::vector<float> f = wide_vec(hidden, ++seed);
      if (hidden >= 3) {
        streams[1] = kNaN;
        f[2] = kInf;
      }
      const std::vector<double> pre = wide_doubles(hc, ++seed);
      const std::vector<double> post = wide_doubles(hc, ++seed);
      const std::vector<double> comb = wide_doubles(hc * hc, ++seed);
      for (bool to_bf16 : {false, true}) {
        std::vector<float> want(static_cast<size_t>(hidden)), got(want.size(), -1.0f);
        mhc_collapse(Isa::reference, streams.data(), hc, hidden, pre.data(), to_bf16, want.data());
        mhc_collapse(GetParam(), streams.data(), hc, hidden, pre.data(), to_bf16, got.data());
        for (int64_t c = 0; c < hidden; ++c) {
          ASSERT_TRUE(same_bits(got[c], want[c]))
              << "collapse hc " << hc << " hidden " << hidden << " bf16 " << to_bf16 << " c " << c << ": "
              << got[c] << " vs " << want[c];
        }
        std::vector<float> want_x(static_cast<size_t>(hc * hidden)), got_x(want_x.size(), -1.0f);
        mhc_expand(Isa::reference, streams.data(), f.data(), post.data(), comb.data(), hc, hidden, to_bf16,
                   want_x.data());
        mhc_expand(GetParam(), streams.data(), f.data(), post.data(), comb.data(), hc, hidden, to_bf16,
                   got_x.data());
        for (size_t i = 0; i < want_x.size(); ++i) {
          ASSERT_TRUE(same_bits(got_x[i], want_x[i]))
              << "expand hc " << hc << " hidden " << hidden << " bf16 " << to_bf16 << " i " << i << ": "
              << got_x[i] << " vs " << want_x[i];
        }
      }
    }
  }
}

// The reference against its definition: f64 math rounded once, checked on one row by hand.
TEST(RmsnormF64, ReferenceRoundsOnceFromDouble) {
  const std::vector<float> x = {1.0f, -2.0f, 3.0f, 0.5f};
  const std::vector<float> w = {1.0f, 0.75f, -1.25f, 2.0f};
  double sum_sq = 0;
  for (float v : x) sum_sq += static_cast<double>(v) * v;
  const double inv = 1.0 / std::sqrt(sum_sq / 4.0 + 1e-6);
  std::vector<float> y32(4), y16(4);
  rmsnorm_f64(Isa::reference, x.data(), 1, 4, w.data(), 1e-6, false, y32.data());
  rmsnorm_f64(Isa::reference, x.data(), 1, 4, w.data(), 1e-6, true, y16.data());
  for (size_t i = 0; i < 4; ++i) {
    const double exact = static_cast<double>(w[i]) * (static_cast<double>(x[i]) * inv);
    EXPECT_EQ(y32[i], static_cast<float>(exact));
    // bf16: the nearest of the two bf16 neighbours of the exact value (8 significant bits).
    uint32_t bits;
    std::memcpy(&bits, &y16[i], 4);
    EXPECT_EQ(bits & 0xffffu, 0u);
    EXPECT_LE(std::fabs(y16[i] - exact), std::fabs(exact) * std::exp2(-8.0));
  }
}

// Tolerance: every path sums x² in f64 (exact products, error ≤ n·2^-53 relative, far below one
// f32 ulp), then does the same three f32 roundings (1/rms, x·r, ·w). The only difference is a
// possible 1-ulp flip of 1/rms when the f64 sums differ in their last bits: ≤ 1 ulp + 2 half-ulp
// roundings → rtol 2 ulp.
TEST_P(IsaTest, RmsnormMatchesReference) {
  for (int64_t dim : kSizes) {
    for (bool with_weight : {false, true}) {
      const int64_t n_rows = 3;
      const int64_t ldx = dim + 5;  // strided rows
      const auto x = random_vec(n_rows * ldx, 1000 + static_cast<uint32_t>(dim), 2.0f);
      const auto w = random_vec(dim, 7);
      std::vector<float> want(static_cast<size_t>(n_rows * dim)), got(want.size());
      rmsnorm(Isa::reference, x.data(), n_rows, dim, ldx, with_weight ? w.data() : nullptr, 1e-6f,
              want.data(), dim);
      rmsnorm(GetParam(), x.data(), n_rows, dim, ldx, with_weight ? w.data() : nullptr, 1e-6f, got.data(),
              dim);
      EXPECT_TRUE(close(got, want, 2 * kUlp1, 0.0,
                        "rmsnorm dim=" + std::to_string(dim) + " w=" + std::to_string(with_weight)));
      // In place gives the same bits as out of place.
      std::vector<float> inplace(x.begin(), x.end());
      rmsnorm(GetParam(), inplace.data(), n_rows, dim, ldx, with_weight ? w.data() : nullptr, 1e-6f,
              inplace.data(), ldx);
      for (int64_t r = 0; r < n_rows; ++r)
        for (int64_t i = 0; i < dim; ++i)
          ASSERT_EQ(inplace[r * ldx + i], got[r * dim + i]) << "in-place row " << r << " i " << i;
    }
  }
}

TEST_P(IsaTest, RmsnormSpecialValues) {
  const int64_t dim = 37;
  auto x = random_vec(4 * dim, 3);
  x[0 * dim + 5] = kNaN;   // row 0: NaN → whole row NaN
  x[1 * dim + 36] = kInf;  // row 1: inf → 1/rms = 0 → inf·0 = NaN there, ±0 elsewhere
  x[2 * dim + 0] = -kInf;
  std::fill(x.begin() + 3 * dim, x.end(), 0.0f);  // row 3: all zero → zeros (eps keeps it finite)
  std::vector<float> want(x.size()), got(x.size());
  rmsnorm(Isa::reference, x.data(), 4, dim, dim, nullptr, 1e-6f, want.data(), dim);
  rmsnorm(GetParam(), x.data(), 4, dim, dim, nullptr, 1e-6f, got.data(), dim);
  EXPECT_TRUE(close(got, want, 2 * kUlp1, 0.0, "rmsnorm special"));
  EXPECT_TRUE(std::isnan(want[3]));
  EXPECT_EQ(want[3 * dim + 4], 0.0f);
  // Zero-length: nothing touched, nothing read.
  rmsnorm(GetParam(), nullptr, 0, 16, 16, nullptr, 1e-6f, nullptr, 16);
  rmsnorm(GetParam(), nullptr, 3, 0, 0, nullptr, 1e-6f, nullptr, 0);
}

TEST(Rmsnorm, ReferenceMatchesDouble) {
  const int64_t dim = 7168;
  const auto x = random_vec(dim, 11, 3.0f);
  const auto w = random_vec(dim, 12);
  std::vector<float> y(dim);
  rmsnorm(Isa::reference, x.data(), 1, dim, dim, w.data(), 1e-6f, y.data(), dim);
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const double r = 1.0 / std::sqrt(ss / dim + 1e-6);
  std::vector<float> want(dim);
  for (int64_t i = 0; i < dim; ++i) want[i] = static_cast<float>(x[i] * r * w[i]);
  // Three f32 roundings against the exact value: ≤ 1.5 ulp, allow 2.
  EXPECT_TRUE(close(y, want, 2 * kUlp1, 0.0, "rmsnorm ref vs f64"));
}

// ---------------------------------------------------------------- rope

// Tolerance: all paths share rope_cos_sin's table, so they differ only in how
// re·c − im·s / re·s + im·c is rounded (two products and a sum: ≤ 1.5 ulp of max(|re|,|im|),
// or 1 ulp with FMA). atol = 2 ulp of the pair's largest component; rtol would be wrong because
// the output can cancel to ~0.
TEST_P(IsaTest, RopeMatchesReference) {
  for (int64_t n_pairs : {1, 15, 16, 17, 32, 63, 64, 65}) {
    for (bool inverse : {false, true}) {
      const int64_t n_tokens = 5;
      const int64_t n_heads = 3;
      const int64_t offset = 7;  // an odd offset: the vector path must not assume alignment
      const int64_t head_stride = offset + 2 * n_pairs + 3;
      const int64_t token_stride = n_heads * head_stride + 1;
      auto x0 = random_vec(n_tokens * token_stride, 21 + static_cast<uint32_t>(n_pairs));
      float max_abs = 0.0f;
      for (float v : x0) max_abs = std::max(max_abs, std::fabs(v));
      // Non-finite inputs in rotated channels must land in the same places in every path.
      x0[1 * token_stride + offset] = kNaN;
      x0[2 * token_stride + head_stride + offset + 1] = kInf;
      std::vector<float> inv_freq(static_cast<size_t>(n_pairs));
      for (int64_t i = 0; i < n_pairs; ++i)
        inv_freq[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / (2.0 * n_pairs)));
      const std::vector<int32_t> pos = {0, 1, 4095, 65535, 163839};
      std::vector<float> want = x0, got = x0;
      rope_interleaved(Isa::reference, want.data(), n_tokens, token_stride, n_heads, head_stride, offset,
                       pos.data(), inv_freq, inverse);
      rope_interleaved(GetParam(), got.data(), n_tokens, token_stride, n_heads, head_stride, offset,
                       pos.data(), inv_freq, inverse);
      EXPECT_TRUE(close(got, want, 0.0, 2 * kUlp1 * max_abs,
                        "rope pairs=" + std::to_string(n_pairs) + " inv=" + std::to_string(inverse)));
      // Channels outside [offset, offset + 2·n_pairs) of each head are untouched.
      for (int64_t t = 0; t < n_tokens; ++t)
        for (int64_t h = 0; h < n_heads; ++h)
          for (int64_t c = 0; c < head_stride; ++c) {
            if (c >= offset && c < offset + 2 * n_pairs) continue;
            const int64_t at = t * token_stride + h * head_stride + c;
            ASSERT_EQ(got[at], x0[at]) << "touched channel " << c;
          }
    }
  }
}

TEST(Rope, ReferenceMatchesDoubleAndInverts) {
  RopeParams p;  // θ = 10000, d = 64, no YaRN
  const auto inv_freq = rope_inv_freq(p);
  const int64_t n_heads = 4;
  const int64_t dim = 64;
  const std::vector<int32_t> pos = {0, 3, 1000, 100000};
  const auto x0 = random_vec(4 * n_heads * dim, 31);
  auto x = x0;
  rope_interleaved(Isa::reference, x.data(), 4, n_heads * dim, n_heads, dim, 0, pos.data(), inv_freq);
  std::vector<float> want(x0.size());
  for (int64_t t = 0; t < 4; ++t)
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < dim / 2; ++i) {
        const int64_t at = (t * n_heads + h) * dim + 2 * i;
        // The contract: the angle is an f32 product; everything after it exact.
        const double angle = static_cast<float>(static_cast<float>(pos[t]) * inv_freq[i]);
        want[at] = static_cast<float>(x0[at] * std::cos(angle) - x0[at + 1] * std::sin(angle));
        want[at + 1] = static_cast<float>(x0[at] * std::sin(angle) + x0[at + 1] * std::cos(angle));
      }
  // f32 cos/sin (0.5 ulp each) + 3 roundings, relative to the pair magnitude (~≤ 4).
  EXPECT_TRUE(close(x, want, 0.0, 4 * 4 * kUlp1, "rope ref vs f64"));
  // Position 0 is the identity, bit for bit.
  for (int64_t c = 0; c < n_heads * dim; ++c) ASSERT_EQ(x[c], x0[c]);
  // inverse undoes the rotation up to rounding.
  rope_interleaved(Isa::reference, x.data(), 4, n_heads * dim, n_heads, dim, 0, pos.data(), inv_freq,
                   /*inverse=*/true);
  EXPECT_TRUE(close(x, x0, 0.0, 4 * 4 * kUlp1, "rope inverse∘rope"));
}

// Expected inv_freq from the spec's closed form with the spec's low/high plugged in.
std::vector<float> yarn_expected(double theta, int d, double factor, double low, double high) {
  std::vector<float> f(static_cast<size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) {
    const double base = 1.0 / std::pow(theta, 2.0 * i / d);
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    f[i] = static_cast<float>(base * (1 - ramp) + base / factor * ramp);
  }
  return f;
}

TEST(Rope, YarnV3LowHigh) {
  // spec §8: θ = 10000, d = 64, factor 40, original 4096, β 32/1 → low 10, high 23.
  RopeParams p;
  p.theta = 10000.0;
  p.yarn_factor = 40.0;
  p.yarn_original_max_pos = 4096.0;
  const auto got = rope_inv_freq(p);
  ASSERT_EQ(got.size(), 32u);
  EXPECT_TRUE(close(got, yarn_expected(10000.0, 64, 40.0, 10, 23), kUlp1, 0.0, "yarn v3"));
  // The ramp endpoints are where the spec says: untouched up to 10, fully divided from 23.
  EXPECT_EQ(got[10], static_cast<float>(std::pow(10000.0, -20.0 / 64)));
  EXPECT_LT(got[11], static_cast<float>(std::pow(10000.0, -22.0 / 64)));
  EXPECT_GT(got[22], static_cast<float>(std::pow(10000.0, -44.0 / 64) / 40.0));
  EXPECT_EQ(got[23], static_cast<float>(std::pow(10000.0, -46.0 / 64) / 40.0));
}

TEST(Rope, YarnV4LowHigh) {
  // spec §3: θ = 160000, factor 16, original 65536 → low 15, high 25.
  RopeParams p;
  p.theta = 160000.0;
  p.yarn_factor = 16.0;
  p.yarn_original_max_pos = 65536.0;
  const auto got = rope_inv_freq(p);
  EXPECT_TRUE(close(got, yarn_expected(160000.0, 64, 16.0, 15, 25), kUlp1, 0.0, "yarn v4"));
  EXPECT_EQ(got[15], static_cast<float>(std::pow(160000.0, -30.0 / 64)));
  EXPECT_LT(got[16], static_cast<float>(std::pow(160000.0, -32.0 / 64)));
  EXPECT_EQ(got[25], static_cast<float>(std::pow(160000.0, -50.0 / 64) / 16.0));
  EXPECT_GT(got[24], static_cast<float>(std::pow(160000.0, -48.0 / 64) / 16.0));
}

TEST(Rope, NoYarnIsPlainPowers) {
  RopeParams p;
  p.theta = 10000.0;
  p.yarn_factor = 1.0;
  const auto got = rope_inv_freq(p);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[i], static_cast<float>(std::pow(1e4, -2.0 * i / 64)));
}

// ---------------------------------------------------------------- exp (x86 polynomial)

// The vector exp behind silu_mul, softmax and attention: over a dense sweep of [−110, 95] (past
// both clamps) its result is within 2 ulp of the correctly rounded e^x (ulps counted as the
// distance between the bit patterns of two positive floats; subnormals included), +inf from
// e^88.73 up, exactly 1 at 0, and NaN for NaN.
TEST_P(IsaTest, ExpIsWithinTwoUlp) {
  if (GetParam() == Isa::reference) GTEST_SKIP() << "the reference uses libm expf";
  const int64_t n = 1 << 21;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -110.0f + 205.0f * static_cast<float>(i) / n;
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = kNaN;
  x[3] = kInf;
  x[4] = -kInf;
  x[5] = 88.7228f;
  x[6] = -87.33655f;  // near the smallest normal result
  auto exp_f32 = GetParam() == Isa::avx512 ? avx512::exp_f32 : avx2::exp_f32;
  exp_f32(x.data(), n, y.data());
  int64_t worst_ulp = 0;
  float worst_x = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x[i])));
    if (std::isnan(x[i])) {
      ASSERT_TRUE(std::isnan(y[i]));
      continue;
    }
    if (std::isinf(want) || want == 0.0f) {
      ASSERT_EQ(y[i], want) << "x=" << x[i];
      continue;
    }
    ASSERT_TRUE(std::isfinite(y[i]) && y[i] > 0) << "x=" << x[i] << " y=" << y[i];
    int32_t a, b;
    std::memcpy(&a, &y[i], 4);
    std::memcpy(&b, &want, 4);
    const int64_t ulp = std::abs(static_cast<int64_t>(a) - b);
    if (ulp > worst_ulp) {
      worst_ulp = ulp;
      worst_x = x[i];
    }
  }
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], 1.0f);
  EXPECT_LE(worst_ulp, 2) << "worst at x=" << worst_x;
  std::printf("[ info ] %s exp: max error %lld ulp (at x=%.9g) over %lld points\n", name_of(GetParam()),
              static_cast<long long>(worst_ulp), worst_x, static_cast<long long>(n));
}

// ---------------------------------------------------------------- silu_mul

// Tolerance: the x86 paths use a polynomial expf (max relative error vs the correctly rounded
// value measured below, ≤ 2 ulp) where the reference uses libm expf (≤ 1 ulp); silu·u adds three
// f32 roundings in both. The relative error of 1 + e^-g is at most that of e^-g, so the total is
// ≤ 3 + 3 = 6 ulp: rtol 8 ulp.
TEST_P(IsaTest, SiluMulMatchesReference) {
  for (int64_t n : kSizes) {
    for (float limit : {0.0f, 10.0f}) {
      const auto g = random_vec(n, 41 + static_cast<uint32_t>(n), 6.0f);
      const auto u = random_vec(n, 42 + static_cast<uint32_t>(n), 6.0f);
      std::vector<float> want(n), got(n);
      silu_mul(Isa::reference, g.data(), u.data(), n, want.data(), limit);
      silu_mul(GetParam(), g.data(), u.data(), n, got.data(), limit);
      EXPECT_TRUE(close(got, want, 8 * kUlp1, 0.0,
                        "silu_mul n=" + std::to_string(n) + " limit=" + std::to_string(limit)));
    }
  }
}

TEST_P(IsaTest, SiluMulSpecialValues) {
  const std::vector<float> g = {kNaN,  1.0f,   kInf,  -kInf,   -100.0f, 100.0f, 0.0f, -0.0f, 2.0f,
                                50.0f, -88.0f, 88.0f, -104.0f, 1e-30f,  3.0f,   kNaN, 20.0f};
  const std::vector<float> u = {1.0f,  kNaN, 2.0f,  1.0f, 1.0f, 1.0f,  kInf, 1.0f,  -kInf,
                                20.0f, 1.0f, -1.0f, 1.0f, 1.0f, 1e30f, 1.0f, -20.0f};
  for (float limit : {0.0f, 10.0f}) {
    std::vector<float> want(g.size()), got(g.size());
    silu_mul(Isa::reference, g.data(), u.data(), static_cast<int64_t>(g.size()), want.data(), limit);
    silu_mul(GetParam(), g.data(), u.data(), static_cast<int64_t>(g.size()), got.data(), limit);
    EXPECT_TRUE(close(got, want, 8 * kUlp1, 0.0, "silu_mul special limit=" + std::to_string(limit)));
  }
  silu_mul(GetParam(), nullptr, nullptr, 0, nullptr, 0.0f);
}

TEST(SiluMul, ReferenceMatchesDoubleAndClamps) {
  const auto g = random_vec(4096, 51, 8.0f);
  const auto u = random_vec(4096, 52, 8.0f);
  std::vector<float> got(g.size());
  for (float limit : {0.0f, 10.0f}) {
    silu_mul(Isa::reference, g.data(), u.data(), 4096, got.data(), limit);
    std::vector<float> want(g.size());
    for (size_t i = 0; i < g.size(); ++i) {
      double gg = g[i], uu = u[i];
      if (limit > 0) {
        gg = std::min(gg, static_cast<double>(limit));
        uu = std::clamp(uu, -static_cast<double>(limit), static_cast<double>(limit));
      }
      want[i] = static_cast<float>(gg / (1.0 + std::exp(-gg)) * uu);
    }
    EXPECT_TRUE(close(got, want, 6 * kUlp1, 0.0, "silu_mul ref vs f64"));
  }
}

// ---------------------------------------------------------------- softmax

// Tolerance: same max and the same f32 subtraction in every path; e^(x−max) differs by ≤ 3 ulp
// (polynomial vs libm), the f64 sum of those terms by at most the same relative amount, then two
// f32 roundings (1/sum, product): ≤ 3 + 3 + 2 = 8 ulp → rtol 10 ulp. atol covers outputs that
// underflow to subnormals (where ulps are absolute, 2^-149).
TEST_P(IsaTest, SoftmaxMatchesReference) {
  for (int64_t n : kSizes) {
    auto x = random_vec(n, 61 + static_cast<uint32_t>(n), 10.0f);
    if (n > 4) x[3] = -kInf;  // a masked entry
    auto want = x, got = x;
    softmax(Isa::reference, want.data(), n);
    softmax(GetParam(), got.data(), n);
    EXPECT_TRUE(close(got, want, 10 * kUlp1, 1e-44, "softmax n=" + std::to_string(n)));
    if (n > 4) {
      EXPECT_EQ(got[3], 0.0f);
    }
    double total = 0.0;
    for (float v : got) total += v;
    EXPECT_NEAR(total, 1.0, 1e-5);
  }
}

TEST_P(IsaTest, SoftmaxSpecialRows) {
  for (int64_t n : {1, 17, 64}) {
    std::vector<float> all_masked(n, -kInf);
    softmax(GetParam(), all_masked.data(), n);
    for (float v : all_masked) ASSERT_EQ(v, 0.0f) << "all -inf row must give zeros, n=" << n;
    for (float poison : {kNaN, kInf}) {
      auto x = random_vec(n, 71);
      x[n / 2] = poison;
      auto want = x, got = x;
      softmax(Isa::reference, want.data(), n);
      softmax(GetParam(), got.data(), n);
      EXPECT_TRUE(close(got, want, 10 * kUlp1, 0.0, "softmax poisoned n=" + std::to_string(n)));
      for (float v : got) ASSERT_TRUE(std::isnan(v));
    }
    // Huge spreads: everything but the max underflows to exactly 0, the max gets exactly 1.
    auto spread = random_vec(n, 72);
    spread[0] = 1e30f;
    softmax(GetParam(), spread.data(), n);
    EXPECT_EQ(spread[0], 1.0f);
    for (int64_t i = 1; i < n; ++i) ASSERT_EQ(spread[i], 0.0f);
  }
  softmax(GetParam(), nullptr, 0);
}

TEST(Softmax, ReferenceMatchesDouble) {
  const auto x0 = random_vec(1000, 81, 5.0f);
  auto x = x0;
  softmax(Isa::reference, x.data(), 1000);
  double m = -1e300;
  for (float v : x0) m = std::max(m, static_cast<double>(v));
  double s = 0.0;
  for (float v : x0) s += std::exp(v - m);
  std::vector<float> want(1000);
  for (int i = 0; i < 1000; ++i) want[i] = static_cast<float>(std::exp(x0[i] - m) / s);
  // libm expf ≤ 1 ulp on an argument carrying one f32 rounding of x − max (≤ 0.5 ulp of |x − max|
  // ≤ 40 here, i.e. up to 40·2^-24 relative in the result), plus 2 roundings.
  EXPECT_TRUE(close(x, want, 40 * kUlp1, 1e-44, "softmax ref vs f64"));
}

// ---------------------------------------------------------------- top-k

// Checks the top-k contract directly (not against another implementation): descending order
// under "NaN lowest, ties to the lower index", and nothing left out is better than the last pick.
void check_topk(const std::vector<float>& s, int64_t k, const std::vector<int32_t>& idx,
                const std::vector<float>& val) {
  auto better = [&](int32_t a, int32_t b) {  // a strictly before b
    const bool na = std::isnan(s[a]), nb = std::isnan(s[b]);
    if (na != nb) return nb;
    if (!na && s[a] != s[b]) return s[a] > s[b];
    return a < b;
  };
  std::vector<bool> chosen(s.size(), false);
  for (int64_t i = 0; i < k; ++i) {
    ASSERT_GE(idx[i], 0);
    ASSERT_LT(idx[i], static_cast<int32_t>(s.size()));
    ASSERT_FALSE(chosen[idx[i]]) << "duplicate index " << idx[i];
    chosen[idx[i]] = true;
    if (std::isnan(s[idx[i]])) {
      ASSERT_TRUE(std::isnan(val[i]));
    } else {
      ASSERT_EQ(val[i], s[idx[i]]);
    }
    if (i > 0) {
      ASSERT_TRUE(better(idx[i - 1], idx[i])) << "order broken at " << i;
    }
  }
  for (int32_t j = 0; j < static_cast<int32_t>(s.size()); ++j) {
    if (!chosen[j] && k > 0) {
      ASSERT_TRUE(better(idx[k - 1], j)) << "left out a better " << j;
    }
  }
}

TEST_P(IsaTest, TopkContract) {
  for (int64_t n : kSizes) {
    auto s = random_vec(n, 91 + static_cast<uint32_t>(n));
    // Many exact ties (rounded to a coarse grid) and a few NaN / ±inf.
    for (auto& v : s) v = std::round(v * 4.0f) / 4.0f;
    if (n > 10) {
      s[2] = kNaN;
      s[n - 1] = kInf;
      s[n / 2] = -kInf;
      s[n / 3] = kNaN;
    }
    for (int64_t k : {int64_t{1}, std::min<int64_t>(8, n), n}) {
      std::vector<int32_t> idx(k);
      std::vector<float> val(k);
      topk(GetParam(), s.data(), n, k, idx.data(), val.data());
      check_topk(s, k, idx, val);
      std::vector<int32_t> idx_only(k);
      topk(GetParam(), s.data(), n, k, idx_only.data(), nullptr);
      EXPECT_EQ(idx_only, idx);
    }
  }
}

TEST(Topk, HandWorkedExample) {
  const std::vector<float> s = {1.0f, 3.0f, kNaN, 3.0f, -kInf, 2.0f, -0.0f, 0.0f};
  std::vector<int32_t> idx(8);
  std::vector<float> val(8);
  topk(Isa::reference, s.data(), 8, 8, idx.data(), val.data());
  // 3 (idx 1) ties 3 (idx 3) → lower index first; −0 == +0 → lower index; NaN last.
  EXPECT_EQ(idx, (std::vector<int32_t>{1, 3, 5, 0, 6, 7, 4, 2}));
  topk(Isa::reference, s.data(), 0, 0, idx.data(), val.data());  // zero-length
}

INSTANTIATE_TEST_SUITE_P(AllIsas, IsaTest, testing::ValuesIn(kAllIsas),
                         [](const testing::TestParamInfo<Isa>& info) {
                           return std::string(name_of(info.param));
                         });

}  // namespace
}  // namespace ds
