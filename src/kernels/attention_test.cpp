// MLA attention kernels: reference against naive f64 math, every x86 path against the reference
// over a shape sweep, batch invariance (bitwise), and the MLA absorption identity (the absorbed
// latent form equals the plain multi-head form when K/V are built from the latent through W_kvb).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/attention.h"

namespace ds {
namespace {

constexpr double kU = 1.0 / (1 << 24);  // f32 unit roundoff

const char* name_of(Isa isa) { return isa_name(isa).data(); }  // isa_name views literals

std::vector<float> random_vec(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

double gamma(double n) { return n * kU / (1.0 - n * kU); }

// A small attention problem in the plain layout: q [n_q, H, qk], k [n_kv, H, qk], v [n_kv, H, dv].
// The absorbed layout is the special case "one shared kv head, v = k[:dv]".
struct Problem {
  int64_t n_q = 0, n_kv = 0;
  int n_heads = 0, qk_dim = 0, v_dim = 0;
  int64_t q_stride_h = 0, kv_head_stride = 0, kv_row_stride = 0, v_row_stride = 0;
  const float* q = nullptr;
  const float* k = nullptr;  // row j, head h at k + j*kv_row_stride + h*kv_head_stride
  const float* v = nullptr;  // row j, head h at v + j*v_row_stride + h*kv_head_stride_v
  int64_t v_head_stride = 0;
  const int32_t* q_pos = nullptr;
  const int32_t* kv_pos = nullptr;  // nullptr: row j has position j
  float scale = 1.0f;

  bool visible(int64_t i, int64_t j) const { return (kv_pos ? kv_pos[j] : j) <= q_pos[i]; }
  const float* q_at(int64_t i, int h) const { return q + (i * n_heads + h) * q_stride_h; }
  const float* k_at(int64_t j, int h) const { return k + j * kv_row_stride + h * kv_head_stride; }
  const float* v_at(int64_t j, int h) const { return v + j * v_row_stride + h * v_head_stride; }
};

// Naive attention in f64: out [n_q, H, v_dim].
std::vector<double> naive_f64(const Problem& p) {
  std::vector<double> out(static_cast<size_t>(p.n_q * p.n_heads * p.v_dim), 0.0);
  for (int64_t i = 0; i < p.n_q; ++i)
    for (int h = 0; h < p.n_heads; ++h) {
      std::vector<double> s;
      std::vector<int64_t> rows;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!p.visible(i, j)) continue;
        double d = 0;
        for (int c = 0; c < p.qk_dim; ++c) d += static_cast<double>(p.q_at(i, h)[c]) * p.k_at(j, h)[c];
        s.push_back(d * p.scale);
        rows.push_back(j);
      }
      if (rows.empty()) continue;
      const double m = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (auto& x : s) sum += (x = std::exp(x - m));
      double* o = &out[(i * p.n_heads + h) * p.v_dim];
      for (size_t t = 0; t < rows.size(); ++t)
        for (int e = 0; e < p.v_dim; ++e) o[e] += s[t] / sum * p.v_at(rows[t], h)[e];
    }
  return out;
}

// Worst-case error bound for an f32 evaluation, per (query, head), from the data:
//   score error  δs ≤ γ(qk)·scale·max_j Σ_c |q_c·k_jc|   (any summation order)
//   weights      relative ≤ 2δs (s_j and the max) + exp (≤ 3 ulp) + γ(n_vis) (the sum) + 2u
//   output       ≤ (weights' + γ(n_vis)) · max_j |v_j|
// Two f32 evaluations differ by at most twice this.
std::vector<double> error_bound(const Problem& p) {
  std::vector<double> bound(static_cast<size_t>(p.n_q * p.n_heads), 0.0);
  for (int64_t i = 0; i < p.n_q; ++i)
    for (int h = 0; h < p.n_heads; ++h) {
      double max_abs_dot = 0, max_v = 0;
      int64_t n_vis = 0;
      for (int64_t j = 0; j < p.n_kv; ++j) {
        if (!p.visible(i, j)) continue;
        ++n_vis;
        double a = 0;
        for (int c = 0; c < p.qk_dim; ++c) a += std::fabs(p.q_at(i, h)[c] * p.k_at(j, h)[c]);
        max_abs_dot = std::max(max_abs_dot, a);
        for (int e = 0; e < p.v_dim; ++e) max_v = std::max(max_v, std::fabs(double{p.v_at(j, h)[e]}));
      }
      const double ds = gamma(p.qk_dim) * p.scale * max_abs_dot;
      const double w = 2 * ds + 6 * kU + 2 * gamma(static_cast<double>(n_vis));
      bound[i * p.n_heads + h] = (w + gamma(static_cast<double>(n_vis))) * max_v;
    }
  return bound;
}

// got vs want with a per-(query, head) absolute bound, plus a relative-RMS check. The RMS limit
// (1e-5) is statistical, not worst case: rounding errors of f32 sums of n terms grow like
// u·√n (≈ 1.4e-6 for the 576-term dots here), so 1e-5 leaves a 7× margin while still catching a
// dropped row or a wrong scale, which cost ≥ 1e-3.
template <typename T>
testing::AssertionResult attention_close(const std::vector<float>& got, const std::vector<T>& want,
                                         const std::vector<double>& bound, int64_t v_dim, double bound_factor,
                                         const std::string& what) {
  double worst = 0, err2 = 0, ref2 = 0;
  size_t worst_i = 0, n_nonfinite = 0;
  for (size_t x = 0; x < got.size(); ++x) {
    if (!std::isfinite(got[x]) || !std::isfinite(static_cast<double>(want[x]))) {
      ++n_nonfinite;
      continue;
    }
    const double e = std::fabs(got[x] - static_cast<double>(want[x]));
    err2 += e * e;
    ref2 += static_cast<double>(want[x]) * want[x];
    const double allowed = bound_factor * bound[x / v_dim] + 1e-30;
    if (e / allowed > worst) {
      worst = e / allowed;
      worst_i = x;
    }
  }
  const double rel_rms = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "%s: worst at %zu (query·head %zu, channel %zu) got %.9g want %.9g err/bound %.3g; "
                "rel RMS %.3g; non-finite %zu",
                what.c_str(), worst_i, worst_i / v_dim, worst_i % v_dim, got.empty() ? 0.0 : got[worst_i],
                want.empty() ? 0.0 : static_cast<double>(want[worst_i]), worst, rel_rms, n_nonfinite);
  if (worst > 1.0 || rel_rms > 1e-5 || n_nonfinite > 0) return testing::AssertionFailure() << buf;
  return testing::AssertionSuccess() << buf;
}

// An absorbed-attention case with its own storage.
struct AbsorbedCase {
  int n_heads, latent, rope;
  int64_t n_ctx;
  std::vector<int32_t> q_pos;
  std::vector<float> q, cache;
  float scale;

  AbsorbedCase(int heads, int latent_dim, int rope_dim, int64_t ctx, std::vector<int32_t> pos, uint32_t seed,
               float scale_mul = 1.0f)
      : n_heads(heads), latent(latent_dim), rope(rope_dim), n_ctx(ctx), q_pos(std::move(pos)) {
    const size_t d = static_cast<size_t>(latent + rope);
    q = random_vec(q_pos.size() * n_heads * d, seed);
    cache = random_vec(static_cast<size_t>(n_ctx) * d, seed + 1);
    scale = scale_mul / std::sqrt(static_cast<float>(d));
  }
  MlaAbsorbedArgs args(float* out) const {
    MlaAbsorbedArgs a;
    a.q = q.data();
    a.n_q = static_cast<int64_t>(q_pos.size());
    a.q_pos = q_pos.data();
    a.cache = cache.data();
    a.n_ctx = n_ctx;
    a.n_heads = n_heads;
    a.latent_dim = latent;
    a.rope_dim = rope;
    a.scale = scale;
    a.out = out;
    return a;
  }
  Problem problem() const {
    Problem p;
    p.n_q = static_cast<int64_t>(q_pos.size());
    p.n_kv = n_ctx;
    p.n_heads = n_heads;
    p.qk_dim = latent + rope;
    p.v_dim = latent;
    p.q_stride_h = latent + rope;
    p.q = q.data();
    p.k = p.v = cache.data();
    p.kv_row_stride = p.v_row_stride = latent + rope;
    p.kv_head_stride = p.v_head_stride = 0;  // one latent row shared by all heads
    p.q_pos = q_pos.data();
    p.scale = scale;
    return p;
  }
  std::vector<float> run(Isa isa, ThreadPool& pool) const {
    std::vector<float> out(q_pos.size() * n_heads * latent, std::nanf(""));
    mla_attention_absorbed(isa, pool, args(out.data()));
    return out;
  }
};

// Positions for a case: decode (the last row only) or a prefill-like spread.
std::vector<int32_t> positions(int64_t n_ctx, bool decode) {
  if (decode) return {static_cast<int32_t>(n_ctx - 1)};
  std::vector<int32_t> pos = {0, static_cast<int32_t>(n_ctx - 1), static_cast<int32_t>(n_ctx / 2),
                              static_cast<int32_t>(n_ctx / 3)};
  return pos;
}

TEST(MlaAbsorbed, ReferenceMatchesNaiveF64) {
  ThreadPool pool(2);
  for (int64_t n_ctx : {1, 7, 64, 130})
    for (int heads : {1, 4})
      for (auto [latent, rope] : {std::pair{32, 16}, std::pair{512, 64}}) {
        AbsorbedCase c(heads, latent, rope, n_ctx, positions(n_ctx, false), 100, 3.0f);
        const auto got = c.run(Isa::reference, pool);
        const auto want = naive_f64(c.problem());
        EXPECT_TRUE(attention_close(got, want, error_bound(c.problem()), latent, 1.0,
                                    "ref vs f64 ctx=" + std::to_string(n_ctx) + " heads=" +
                                        std::to_string(heads) + " latent=" + std::to_string(latent)));
      }
}

class AttentionIsaTest : public testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << name_of(GetParam()) << " not supported";
  }
};

TEST_P(AttentionIsaTest, AbsorbedMatchesReference) {
  ThreadPool pool(2);
  for (int64_t n_ctx : {1, 7, 64, 130})
    for (int heads : {1, 4, 16})
      for (auto [latent, rope] : {std::pair{32, 16}, std::pair{512, 64}})
        for (bool decode : {true, false})
          for (float scale_mul : {1.0f, 4.0f}) {
            AbsorbedCase c(heads, latent, rope, n_ctx, positions(n_ctx, decode),
                           static_cast<uint32_t>(200 + n_ctx + heads), scale_mul);
            const auto want = c.run(Isa::reference, pool);
            const auto got = c.run(GetParam(), pool);
            EXPECT_TRUE(attention_close(got, want, error_bound(c.problem()), latent, 2.0,
                                        std::string(name_of(GetParam())) + " ctx=" + std::to_string(n_ctx) +
                                            " heads=" + std::to_string(heads) + " latent=" +
                                            std::to_string(latent) + " decode=" + std::to_string(decode)));
          }
}

// Batch invariance: a query's output bits do not depend on which other queries share the call,
// their order, or the pool size.
TEST_P(AttentionIsaTest, AbsorbedIsBatchInvariant) {
  ThreadPool pool1(1), pool3(3);
  for (auto [latent, rope] : {std::pair{32, 16}, std::pair{512, 64}}) {
    const int heads = 16;
    AbsorbedCase all(heads, latent, rope, 130, {129, 5, 64, 0, 100}, 300);
    const auto together = all.run(GetParam(), pool3);
    const size_t row = static_cast<size_t>(heads) * latent;
    for (size_t i = 0; i < all.q_pos.size(); ++i) {
      AbsorbedCase alone = all;
      alone.q_pos = {all.q_pos[i]};
      alone.q.assign(all.q.begin() + i * heads * (latent + rope),
                     all.q.begin() + (i + 1) * heads * (latent + rope));
      // Alone on 1 thread (all heads in one task) and on 3 threads (heads split over tasks).
      for (ThreadPool* pool : {&pool1, &pool3}) {
        const auto single = alone.run(GetParam(), *pool);
        ASSERT_EQ(std::memcmp(single.data(), together.data() + i * row, row * sizeof(float)), 0)
            << name_of(GetParam()) << ": query " << i << " alone (" << pool->n_threads()
            << " threads) differs from batched (3 threads)";
      }
    }
    // Reversed order, 1 thread.
    AbsorbedCase rev = all;
    std::reverse(rev.q_pos.begin(), rev.q_pos.end());
    const size_t qrow = static_cast<size_t>(heads) * (latent + rope);
    for (size_t i = 0; i < all.q_pos.size(); ++i)
      std::copy(all.q.begin() + i * qrow, all.q.begin() + (i + 1) * qrow,
                rev.q.begin() + (all.q_pos.size() - 1 - i) * qrow);
    const auto reversed = rev.run(GetParam(), pool1);
    for (size_t i = 0; i < all.q_pos.size(); ++i)
      ASSERT_EQ(std::memcmp(reversed.data() + (all.q_pos.size() - 1 - i) * row, together.data() + i * row,
                            row * sizeof(float)),
                0)
          << "reversed batch changes query " << i;
  }
}

// `c`'s cache laid out in blocks of block_size rows at shuffled block ids inside a larger pool.
// Every row nobody owns (the tail of the last block, spare blocks) is NaN, so a read past n_ctx
// or through a wrong block would show up as NaN output.
struct PagedCache {
  std::vector<float> pool;
  std::vector<const float*> block_rows;  // [ceil(n_ctx / block_size)]
};

PagedCache page_cache(const AbsorbedCase& c, int64_t block_size, uint32_t seed) {
  const int64_t d = c.latent + c.rope;
  const int64_t n_blocks = (c.n_ctx + block_size - 1) / block_size;
  const int64_t n_pool_blocks = n_blocks + 3;
  std::vector<int32_t> ids(static_cast<size_t>(n_pool_blocks));
  for (size_t b = 0; b < ids.size(); ++b) ids[b] = static_cast<int32_t>(b);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
  PagedCache p;
  p.pool.assign(static_cast<size_t>(n_pool_blocks * block_size * d), std::nanf(""));
  for (int64_t j = 0; j < c.n_ctx; ++j)
    std::copy_n(&c.cache[j * d], d, &p.pool[(ids[j / block_size] * block_size + j % block_size) * d]);
  for (int64_t b = 0; b < n_blocks; ++b) p.block_rows.push_back(&p.pool[ids[b] * block_size * d]);
  return p;
}

// Paging changes addresses only: every block size (1, odd, smaller and larger than the kernels'
// 64-row sweep, larger than the context) and every block placement gives the contiguous result
// bit for bit, on every path.
TEST_P(AttentionIsaTest, AbsorbedIsBitwiseInvariantToPaging) {
  ThreadPool pool(3);
  for (int64_t n_ctx : {1, 64, 130})
    for (auto [latent, rope] : {std::pair{32, 16}, std::pair{512, 64}})
      for (int heads : {1, 16})
        for (bool decode : {true, false}) {
          AbsorbedCase c(heads, latent, rope, n_ctx, positions(n_ctx, decode),
                         static_cast<uint32_t>(900 + n_ctx + heads));
          const auto want = c.run(GetParam(), pool);
          for (int64_t block_size : {1, 3, 16, 64, 200}) {
            const PagedCache paged = page_cache(c, block_size, static_cast<uint32_t>(block_size));
            std::vector<float> got(want.size(), 0.0f);
            MlaAbsorbedArgs a = c.args(got.data());
            a.cache = nullptr;
            a.block_rows = paged.block_rows.data();
            a.block_size = block_size;
            mla_attention_absorbed(GetParam(), pool, a);
            ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
                << name_of(GetParam()) << " ctx=" << n_ctx << " latent=" << latent << " heads=" << heads
                << " decode=" << decode << " block_size=" << block_size;
          }
        }
}

// The plain layout with explicit per-head K and V and arbitrary kv positions.
struct MhaCase {
  int n_heads, qk, dv;
  std::vector<int32_t> q_pos, kv_pos;
  std::vector<float> q, k, v;
  float scale;

  MhaCase(int heads, int qk_dim, int v_dim, std::vector<int32_t> qp, std::vector<int32_t> kvp, uint32_t seed)
      : n_heads(heads), qk(qk_dim), dv(v_dim), q_pos(std::move(qp)), kv_pos(std::move(kvp)) {
    q = random_vec(q_pos.size() * heads * qk, seed);
    k = random_vec(kv_pos.size() * heads * qk, seed + 1);
    v = random_vec(kv_pos.size() * heads * dv, seed + 2);
    scale = 2.0f / std::sqrt(static_cast<float>(qk));
  }
  MhaArgs args(float* out) const {
    MhaArgs a;
    a.q = q.data();
    a.n_q = static_cast<int64_t>(q_pos.size());
    a.q_pos = q_pos.data();
    a.k = k.data();
    a.v = v.data();
    a.n_kv = static_cast<int64_t>(kv_pos.size());
    a.kv_pos = kv_pos.data();
    a.n_heads = n_heads;
    a.qk_dim = qk;
    a.v_dim = dv;
    a.scale = scale;
    a.out = out;
    return a;
  }
  Problem problem() const {
    Problem p;
    p.n_q = static_cast<int64_t>(q_pos.size());
    p.n_kv = static_cast<int64_t>(kv_pos.size());
    p.n_heads = n_heads;
    p.qk_dim = qk;
    p.v_dim = dv;
    p.q_stride_h = qk;
    p.q = q.data();
    p.k = k.data();
    p.v = v.data();
    p.kv_row_stride = static_cast<int64_t>(n_heads) * qk;
    p.kv_head_stride = qk;
    p.v_row_stride = static_cast<int64_t>(n_heads) * dv;
    p.v_head_stride = dv;
    p.q_pos = q_pos.data();
    p.kv_pos = kv_pos.data();
    p.scale = scale;
    return p;
  }
  std::vector<float> run(Isa isa, ThreadPool& pool) const {
    std::vector<float> out(q_pos.size() * n_heads * dv, std::nanf(""));
    mha_attention(isa, pool, args(out.data()));
    return out;
  }
};

// kv rows in a shuffled position order (the kernel must mask by position, not by index).
std::vector<int32_t> shuffled_positions(int64_t n, uint32_t seed) {
  std::vector<int32_t> pos(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) pos[j] = static_cast<int32_t>(j);
  std::shuffle(pos.begin(), pos.end(), std::mt19937(seed));
  return pos;
}

TEST(Mha, ReferenceMatchesNaiveF64) {
  ThreadPool pool(2);
  for (int64_t n_kv : {1, 7, 64, 130}) {
    MhaCase c(4, 192, 128, positions(n_kv, false), shuffled_positions(n_kv, 5), 400);
    EXPECT_TRUE(attention_close(c.run(Isa::reference, pool), naive_f64(c.problem()), error_bound(c.problem()),
                                c.dv, 1.0, "mha ref vs f64 n_kv=" + std::to_string(n_kv)));
  }
}

TEST_P(AttentionIsaTest, MhaMatchesReferenceAndIsBatchInvariant) {
  ThreadPool pool1(1), pool3(3);
  for (int64_t n_kv : {1, 7, 64, 130})
    for (int heads : {1, 4, 16})
      for (auto [qk, dv] : {std::pair{48, 32}, std::pair{192, 128}, std::pair{17, 9}}) {
        MhaCase c(heads, qk, dv, positions(n_kv, false), shuffled_positions(n_kv, 6),
                  static_cast<uint32_t>(500 + n_kv + heads));
        const auto want = c.run(Isa::reference, pool3);
        const auto got = c.run(GetParam(), pool3);
        const std::string what = std::string(name_of(GetParam())) + " mha n_kv=" + std::to_string(n_kv) +
                                 " heads=" + std::to_string(heads) + " qk=" + std::to_string(qk);
        EXPECT_TRUE(attention_close(got, want, error_bound(c.problem()), dv, 2.0, what));
        // The last query alone on one thread gives the same bits.
        MhaCase alone = c;
        alone.q_pos = {c.q_pos.back()};
        const size_t qrow = static_cast<size_t>(heads) * qk;
        alone.q.assign(c.q.end() - qrow, c.q.end());
        const auto single = alone.run(GetParam(), pool1);
        const size_t row = static_cast<size_t>(heads) * dv;
        ASSERT_EQ(std::memcmp(single.data(), got.data() + got.size() - row, row * sizeof(float)), 0)
            << what << ": batch invariance";
      }
}

// The MLA absorption identity. Per head h with W_uk[h]: [nope, latent], W_uv[h]: [dv, latent]:
//   plain:    k_h = [W_uk[h]·c ; k_pe], v_h = W_uv[h]·c, q_h = [q_nope ; q_pe]
//   absorbed: q'_h = [W_uk[h]ᵀ·q_nope ; q_pe] over the cache [c ; k_pe], then W_uv[h]·o_latent.
// Both are the same function; they round different intermediates, so they agree to f32 noise.
TEST_P(AttentionIsaTest, AbsorbedEqualsPlainThroughWkvb) {
  ThreadPool pool(2);
  for (auto [latent, rope, nope, dv] : {std::tuple{32, 16, 24, 20}, std::tuple{512, 64, 128, 128}}) {
    const int heads = 4;
    const int64_t n_ctx = 70;
    const std::vector<int32_t> q_pos = {69, 10, 0, 40};
    const size_t n_q = q_pos.size();
    const auto c_kv = random_vec(n_ctx * latent, 601);
    const auto k_pe = random_vec(n_ctx * rope, 602);
    const float w_std = 1.0f / std::sqrt(static_cast<float>(latent));
    const auto w_uk = random_vec(static_cast<size_t>(heads) * nope * latent, 603, w_std);
    const auto w_uv = random_vec(static_cast<size_t>(heads) * dv * latent, 604, w_std);
    const auto q_nope = random_vec(n_q * heads * nope, 605);
    const auto q_pe = random_vec(n_q * heads * rope, 606);
    const float scale = 1.5f / std::sqrt(static_cast<float>(nope + rope));

    // Plain form: K, V per head from the latent (products in f64, stored as f32).
    MhaCase plain(heads, nope + rope, dv, q_pos, std::vector<int32_t>(n_ctx), 0);
    for (int64_t j = 0; j < n_ctx; ++j) plain.kv_pos[j] = static_cast<int32_t>(j);
    for (int64_t j = 0; j < n_ctx; ++j)
      for (int h = 0; h < heads; ++h) {
        float* kr = &plain.k[(j * heads + h) * (nope + rope)];
        for (int r = 0; r < nope; ++r) {
          double acc = 0;
          for (int l = 0; l < latent; ++l)
            acc += double{w_uk[(h * nope + r) * latent + l]} * c_kv[j * latent + l];
          kr[r] = static_cast<float>(acc);
        }
        for (int r = 0; r < rope; ++r) kr[nope + r] = k_pe[j * rope + r];
        float* vr = &plain.v[(j * heads + h) * dv];
        for (int r = 0; r < dv; ++r) {
          double acc = 0;
          for (int l = 0; l < latent; ++l)
            acc += double{w_uv[(h * dv + r) * latent + l]} * c_kv[j * latent + l];
          vr[r] = static_cast<float>(acc);
        }
      }
    for (size_t i = 0; i < n_q; ++i)
      for (int h = 0; h < heads; ++h) {
        float* qr = &plain.q[(i * heads + h) * (nope + rope)];
        std::copy_n(&q_nope[(i * heads + h) * nope], nope, qr);
        std::copy_n(&q_pe[(i * heads + h) * rope], rope, qr + nope);
      }
    plain.scale = scale;
    const auto want = plain.run(GetParam(), pool);

    // Absorbed form.
    AbsorbedCase absorbed(heads, latent, rope, n_ctx, q_pos, 0);
    absorbed.scale = scale;
    for (int64_t j = 0; j < n_ctx; ++j) {
      std::copy_n(&c_kv[j * latent], latent, &absorbed.cache[j * (latent + rope)]);
      std::copy_n(&k_pe[j * rope], rope, &absorbed.cache[j * (latent + rope) + latent]);
    }
    for (size_t i = 0; i < n_q; ++i)
      for (int h = 0; h < heads; ++h) {
        float* qr = &absorbed.q[(i * heads + h) * (latent + rope)];
        for (int l = 0; l < latent; ++l) {
          double acc = 0;
          for (int r = 0; r < nope; ++r)
            acc += double{w_uk[(h * nope + r) * latent + l]} * q_nope[(i * heads + h) * nope + r];
          qr[l] = static_cast<float>(acc);
        }
        std::copy_n(&q_pe[(i * heads + h) * rope], rope, qr + latent);
      }
    const auto o_latent = absorbed.run(GetParam(), pool);
    std::vector<float> got(n_q * heads * dv);
    for (size_t i = 0; i < n_q; ++i)
      for (int h = 0; h < heads; ++h)
        for (int r = 0; r < dv; ++r) {
          double acc = 0;
          for (int l = 0; l < latent; ++l)
            acc += double{w_uv[(h * dv + r) * latent + l]} * o_latent[(i * heads + h) * latent + l];
          got[(i * heads + h) * dv + r] = static_cast<float>(acc);
        }
    // Tolerance: the forms round different intermediates (q'·c over latent+rope terms with an
    // f32-rounded q', against q·k over nope+rope terms with f32-rounded K and V), so there is no
    // shared worst-case bound; expected differences are f32 noise, ~u·√576 relative. Per element
    // we cap at 1e-4·max|V| (loose); the relative-RMS check (1e-5) is the sharp one.
    double max_v = 0;
    for (float x : plain.v) max_v = std::max(max_v, std::fabs(double{x}));
    const std::vector<double> cap(n_q * heads, 1e-4 * max_v);
    EXPECT_TRUE(
        attention_close(got, want, cap, dv, 1.0,
                        std::string(name_of(GetParam())) + " absorption latent=" + std::to_string(latent)));
  }
}

TEST_P(AttentionIsaTest, ZeroQueriesIsANoOp) {
  ThreadPool pool(2);
  MlaAbsorbedArgs a;
  a.n_q = 0;
  a.n_heads = 4;
  mla_attention_absorbed(GetParam(), pool, a);
  MhaArgs m;
  m.n_q = 0;
  m.n_heads = 4;
  mha_attention(GetParam(), pool, m);
  // Queries that see no kv row at all (every kv position is later) get zeros, not NaN.
  MhaCase none(4, 48, 32, {0, 1}, {5, 6, 7}, 700);
  for (float x : none.run(GetParam(), pool)) ASSERT_EQ(x, 0.0f);
  MhaCase empty(4, 48, 32, {0, 1}, {}, 701);
  for (float x : empty.run(GetParam(), pool)) ASSERT_EQ(x, 0.0f);
}

// A NaN in cache row k poisons exactly the queries that can see it: every query at a position ≥ k
// is all NaN (an Inf changes them), every earlier query is bit-identical to the clean run (the
// masking is by position, and a later row is never read into an earlier query's sums).
TEST_P(AttentionIsaTest, NonFiniteCacheRowOnlyReachesLaterQueries) {
  ThreadPool pool(3);
  for (float poison : {std::nanf(""), std::numeric_limits<float>::infinity()}) {
    AbsorbedCase c(8, 32, 16, 40, {39, 5, 20, 21, 0, 30}, 800);
    const auto clean = c.run(GetParam(), pool);
    const int64_t k = 21;
    c.cache[k * 48 + 3] = poison;
    const auto got = c.run(GetParam(), pool);
    const size_t row = static_cast<size_t>(c.n_heads) * c.latent;
    for (size_t i = 0; i < c.q_pos.size(); ++i) {
      if (c.q_pos[i] >= k && std::isnan(poison)) {
        for (size_t x = 0; x < row; ++x) ASSERT_TRUE(std::isnan(got[i * row + x])) << "query " << i;
      } else if (c.q_pos[i] >= k) {  // ±inf scores or inf·0: the result changes, NaN or not
        ASSERT_NE(std::memcmp(&got[i * row], &clean[i * row], row * sizeof(float)), 0) << "query " << i;
      } else {
        ASSERT_EQ(std::memcmp(&got[i * row], &clean[i * row], row * sizeof(float)), 0) << "query " << i;
      }
    }
    MhaCase m(4, 48, 32, {39, 5, 20, 21}, shuffled_positions(40, 9), 801);
    const auto m_clean = m.run(GetParam(), pool);
    int64_t j_k = 0;  // the kv row holding position k
    while (m.kv_pos[j_k] != k) ++j_k;
    m.k[(j_k * 4 + 1) * 48 + 7] = poison;  // head 1's key
    const auto m_got = m.run(GetParam(), pool);
    for (size_t i = 0; i < m.q_pos.size(); ++i)
      for (int h = 0; h < 4; ++h) {
        const float* o = &m_got[(i * 4 + h) * 32];
        const float* o_clean = &m_clean[(i * 4 + h) * 32];
        const bool hit = h == 1 && m.q_pos[i] >= k;
        if (hit && !std::isnan(poison)) {  // a ±inf score: NaN (+inf) or the row dropped (−inf)
          ASSERT_NE(std::memcmp(o, o_clean, 32 * sizeof(float)), 0) << "query " << i;
          continue;
        }
        for (int e = 0; e < 32; ++e) {
          if (hit) {
            ASSERT_TRUE(std::isnan(o[e])) << "query " << i << " head " << h;
          } else {
            ASSERT_EQ(std::memcmp(&o[e], &o_clean[e], sizeof(float)), 0) << "query " << i << " head " << h;
          }
        }
      }
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, AttentionIsaTest, testing::ValuesIn(kAllIsas),
                         [](const testing::TestParamInfo<Isa>& info) {
                           return std::string(name_of(info.param));
                         });

}  // namespace
}  // namespace ds
