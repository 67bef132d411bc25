// Compressor, indexer top-k and sparse attention with sink: every path against the scalar
// reference over a shape sweep (tolerances derived per kernel below), the reference against
// independent formulas (f64), each unit bitwise independent of its batch, and edge cases
// (empty slots, no keys, ties, the CSA first entry).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/compressor.h"
#include "kernels/indexer.h"
#include "kernels/ref/v4_attention_ref.h"
#include "kernels/sparse_attention.h"
#include "kernels/topk.h"
#include "tensor/dtype.h"

namespace ds {

static void PrintTo(Isa isa, std::ostream* os) { *os << isa_name(isa); }

namespace {

std::vector<float> random_normal(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(n);
  for (auto& e : v) e = normal(rng);
  return v;
}

bool bits_equal(float a, float b) { return f32_to_bits(a) == f32_to_bits(b); }

class V4AttentionTest : public ::testing::TestWithParam<Isa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) GTEST_SKIP() << "CPU lacks " << isa_name(GetParam());
  }
};

// ---------------- compressor ----------------

struct CompressorCase {
  int32_t ratio;
  int32_t d_c;
  bool overlap;
  bool first_has_prev;
  int64_t n_groups;  // groups after the optional previous-group rows
};

struct CompressorData {
  std::vector<float> kv, score, out;
  CompressorArgs args;
};

CompressorData make_compressor(const CompressorCase& c, uint32_t seed) {
  CompressorData d;
  const int64_t width = (c.overlap ? 2 : 1) * int64_t{c.d_c};
  const int64_t ld = width + 3;
  const int64_t n_rows = (c.n_groups + (c.overlap && c.first_has_prev ? 1 : 0)) * c.ratio;
  d.kv = random_normal(static_cast<size_t>(n_rows * ld), seed);
  d.score = random_normal(static_cast<size_t>(n_rows * ld), seed + 1, 3.0f);  // gate logits of a few units
  const int64_t ldo = c.d_c + 1;
  d.out.assign(static_cast<size_t>(std::max<int64_t>(1, c.n_groups) * ldo), -7.0f);
  d.args = {d.kv.data(), d.score.data(),   ld,           n_rows, c.ratio, c.d_c,
            c.overlap,   c.first_has_prev, d.out.data(), ldo};
  return d;
}

std::string describe(const CompressorCase& c) {
  return "ratio=" + std::to_string(c.ratio) + " d_c=" + std::to_string(c.d_c) +
         (c.overlap ? " overlap" : "") + (c.first_has_prev ? " first_has_prev" : "") +
         " groups=" + std::to_string(c.n_groups);
}

// The reference against the formula in f64: softmax over the terms (previous group with the
// first-half channels, current group with the second half) of the a values.
TEST(Compressor, ReferenceMatchesTheSpecFormula) {
  for (const CompressorCase& c :
       {CompressorCase{4, 5, true, false, 3}, CompressorCase{4, 5, true, true, 2},
        CompressorCase{16, 3, false, false, 2}, CompressorCase{2, 7, false, false, 3}}) {
    CompressorData d = make_compressor(c, 3);
    ThreadPool pool(1);
    compressor_pool(Isa::reference, pool, d.args);
    const int64_t base = (c.overlap && c.first_has_prev) ? c.ratio : 0;
    for (int64_t j = 0; j < c.n_groups; ++j) {
      for (int64_t ch = 0; ch < c.d_c; ++ch) {
        std::vector<std::pair<double, double>> terms;  // (z, a)
        const int64_t cur = base + j * c.ratio;
        if (c.overlap && (j > 0 || c.first_has_prev)) {
          for (int64_t t = cur - c.ratio; t < cur; ++t)
            terms.push_back({d.score[t * d.args.ld + ch], d.kv[t * d.args.ld + ch]});
        }
        const int64_t off = c.overlap ? c.d_c : 0;
        for (int64_t t = cur; t < cur + c.ratio; ++t)
          terms.push_back({d.score[t * d.args.ld + off + ch], d.kv[t * d.args.ld + off + ch]});
        double mx = -INFINITY, sum = 0.0, want = 0.0, abs_sum = 0.0;
        for (auto& [z, a] : terms) mx = std::max(mx, z);
        for (auto& [z, a] : terms) sum += std::exp(z - mx);
        for (auto& [z, a] : terms) {
          want += std::exp(z - mx) / sum * a;
          abs_sum += std::exp(z - mx) / sum * std::fabs(a);
        }
        EXPECT_NEAR(d.out[j * d.args.ldo + ch], want, 1e-5 * abs_sum + 1e-30) << describe(c) << " j=" << j;
      }
    }
  }
}

// Tolerance: per (entry, channel) the paths run the same scalar sequence except exp (vector
// polynomial ≤ 1 ulp vs libm ≤ 1 ulp: each e_t within 2 ulp, so each p_t = e_t / Σe within
// (2 + 2 + n_terms) ulp incl. the sum's own rounding) and the multiply-add chain (same order).
// So |Δout| ≤ (n_terms + 6) · 2^-23 · Σ_t p_t |a_t|; we allow twice that.
TEST_P(V4AttentionTest, CompressorMatchesReference) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 10;
  for (int32_t ratio : {1, 2, 4, 16, 128}) {
    for (int32_t d_c : {1, 7, 16, 33, 128}) {
      for (bool overlap : {false, true}) {
        for (bool first_has_prev : {false, true}) {
          if (!overlap && first_has_prev) continue;
          if (ratio == 128 && d_c > 16) continue;  // keep the sweep short
          const CompressorCase c{ratio, d_c, overlap, first_has_prev, ratio >= 16 ? 2 : 5};
          CompressorData d = make_compressor(c, ++seed);
          compressor_pool(isa, pool, d.args);
          CompressorData r = make_compressor(c, seed);
          compressor_pool(Isa::reference, pool, r.args);
          const int64_t n_terms = (overlap ? 2 : 1) * int64_t{ratio};
          for (int64_t j = 0; j < c.n_groups; ++j) {
            for (int64_t ch = 0; ch < d_c; ++ch) {
              // Σ p|a| <= max |a| over the terms (a convex combination).
              double amax = 0.0;
              const int64_t rows0 = (overlap && (j > 0 || first_has_prev)) ? -ratio : 0;
              const int64_t base = (overlap && first_has_prev) ? ratio : 0;
              for (int64_t t = rows0; t < ratio; ++t) {
                const int64_t row = base + j * ratio + t;
                const int64_t col = (overlap && t >= 0) ? d_c + ch : ch;
                amax = std::max(amax, std::fabs(double{d.kv[row * d.args.ld + col]}));
              }
              const double tol = 2.0 * (n_terms + 6) * 0x1p-23 * amax;
              const float got = d.out[j * d.args.ldo + ch], want = r.out[j * d.args.ldo + ch];
              ASSERT_LE(std::fabs(double{got} - want), tol)
                  << isa_name(isa) << " " << describe(c) << " entry " << j << " channel " << ch << ": " << got
                  << " vs reference " << want;
            }
            EXPECT_EQ(d.out[j * d.args.ldo + d_c], -7.0f) << "row padding untouched";
          }
        }
      }
    }
  }
}

// Entry j computed in a call over all groups equals entry j computed alone from its own rows
// (with the previous group passed as first_has_prev rows): prefill chunks and decode agree.
TEST_P(V4AttentionTest, CompressorEntryIndependentOfItsBatch) {
  const Isa isa = GetParam();
  ThreadPool pool(3);
  for (bool overlap : {false, true}) {
    const CompressorCase c{4, 37, overlap, false, 6};
    CompressorData all = make_compressor(c, 77);
    compressor_pool(isa, pool, all.args);
    for (int64_t j = 0; j < c.n_groups; ++j) {
      CompressorArgs one = all.args;
      std::vector<float> out(static_cast<size_t>(all.args.ldo), 0.0f);
      one.out = out.data();
      if (overlap && j > 0) {
        one.first_has_prev = true;
        one.kv += (j - 1) * c.ratio * one.ld;
        one.score += (j - 1) * c.ratio * one.ld;
        one.n_rows = 2 * c.ratio;
      } else {
        one.kv += j * c.ratio * one.ld;
        one.score += j * c.ratio * one.ld;
        one.n_rows = c.ratio;
      }
      ASSERT_EQ(compressor_n_entries(one), 1);
      compressor_pool(isa, pool, one);
      for (int64_t ch = 0; ch < c.d_c; ++ch) {
        ASSERT_TRUE(bits_equal(out[ch], all.out[j * all.args.ldo + ch]))
            << isa_name(isa) << (overlap ? " overlap" : "") << " entry " << j << " channel " << ch;
      }
    }
  }
}

TEST(Compressor, EntryCountsAndPartialGroups) {
  CompressorArgs a;
  a.ratio = 4;
  a.n_rows = 11;
  EXPECT_EQ(compressor_n_entries(a), 2);  // the partial third group waits for its last token
  a.overlap = true;
  a.first_has_prev = true;
  EXPECT_EQ(compressor_n_entries(a), 1);
  a.n_rows = 3;
  EXPECT_EQ(compressor_n_entries(a), 0);
}

// ---------------- indexer ----------------

struct IndexerData {
  std::vector<float> q, w, keys, scores;
  std::vector<int64_t> n_visible;
  std::vector<int32_t> top;
  IndexerArgs args;
};

IndexerData make_indexer(int64_t n_q, int32_t n_heads, int32_t head_dim, int64_t n_keys, int64_t top_k,
                         uint32_t seed) {
  IndexerData d;
  d.q = random_normal(static_cast<size_t>(n_q * n_heads * head_dim), seed);
  d.w = random_normal(static_cast<size_t>(n_q * n_heads), seed + 1, 0.1f);
  const int64_t ldk = head_dim + 2;
  d.keys = random_normal(static_cast<size_t>(std::max<int64_t>(1, n_keys) * ldk), seed + 2);
  std::mt19937 rng(seed + 3);
  d.n_visible.resize(static_cast<size_t>(n_q));
  for (auto& v : d.n_visible) v = std::uniform_int_distribution<int64_t>(0, n_keys + 2)(rng);
  if (n_q > 0) d.n_visible[0] = n_keys;  // one query sees everything
  d.scores.assign(static_cast<size_t>(std::max<int64_t>(1, n_q * n_keys)), 0.0f);
  d.top.assign(static_cast<size_t>(std::max<int64_t>(1, n_q * top_k)), -9);
  d.args = {d.q.data(), d.w.data(),         n_q,   n_heads,         head_dim,    d.keys.data(), n_keys,
            ldk,        d.n_visible.data(), top_k, d.scores.data(), d.top.data()};
  return d;
}

// Tolerance: paths differ in each head's dot product summation order (both sums within head_dim ·
// 2^-24 · Σ|q k| of the exact value; ReLU is 1-Lipschitz) and, on x86, possibly a fused multiply-add
// in the head sum (same order; at most one rounding per head, ≤ n_heads · 2^-24 · Σ_h |w_h d_h|):
// |ΔI| ≤ 2 · Σ_h |w_h| · (2 · head_dim + n_heads) · 2^-24 · Σ_c |q_hc k_c| (factor 2 of slack). With bf16
// rounding, a value within that noise of a bf16 rounding boundary may round the other way at each of the
// three rounding points: add one bf16 ulp (2^-8 relative) of every head term and of the sum, Σ_h 2 · 2^-8 ·
// |w_h d_h| + 2^-8 |I|.
double indexer_tol(const IndexerData& d, int64_t i, int64_t t, bool round_bf16 = false) {
  const IndexerArgs& a = d.args;
  double tol = 0.0;
  for (int32_t h = 0; h < a.n_heads; ++h) {
    double abs_dot = 0.0;
    for (int32_t c = 0; c < a.head_dim; ++c)
      abs_dot += std::fabs(double{a.q[(i * a.n_heads + h) * a.head_dim + c]} * a.keys[t * a.ldk + c]);
    tol +=
        std::fabs(double{a.weights[i * a.n_heads + h]}) * (2.0 * a.head_dim + a.n_heads) * 0x1p-24 * abs_dot;
    if (round_bf16) tol += 3.0 * 0x1p-8 * std::fabs(double{a.weights[i * a.n_heads + h]}) * abs_dot;
  }
  return 2.0 * tol + 1e-30;
}

TEST(Indexer, ReferenceScoresMatchTheFormula) {
  IndexerData d = make_indexer(3, 5, 24, 9, 4, 5);
  ThreadPool pool(1);
  indexer_topk(Isa::reference, pool, d.args);
  for (int64_t i = 0; i < 3; ++i) {
    const int64_t n_vis = std::min<int64_t>(d.n_visible[i], 9);
    for (int64_t t = 0; t < 9; ++t) {
      if (t >= n_vis) {
        EXPECT_EQ(d.scores[i * 9 + t], -INFINITY);
        continue;
      }
      double want = 0.0;
      for (int h = 0; h < 5; ++h) {
        double dot = 0.0;
        for (int c = 0; c < 24; ++c) dot += double{d.q[(i * 5 + h) * 24 + c]} * d.keys[t * d.args.ldk + c];
        want += d.w[i * 5 + h] * std::max(dot, 0.0);
      }
      EXPECT_NEAR(d.scores[i * 9 + t], want, indexer_tol(d, i, t)) << "i=" << i << " t=" << t;
    }
  }
}

TEST(Indexer, Bf16ModeRoundsAtTheThreeOfficialPoints) {
  IndexerData d = make_indexer(2, 3, 16, 7, 3, 6);
  d.args.round_bf16 = true;
  ThreadPool pool(1);
  indexer_topk(Isa::reference, pool, d.args);
  for (int64_t i = 0; i < 2; ++i) {
    for (int64_t t = 0; t < std::min<int64_t>(d.n_visible[i], 7); ++t) {
      float sum = 0.0f;
      for (int h = 0; h < 3; ++h) {
        float dot = 0.0f;
        for (int c = 0; c < 16; ++c) dot += d.q[(i * 3 + h) * 16 + c] * d.keys[t * d.args.ldk + c];
        sum += round_to_bf16(d.w[i * 3 + h] * round_to_bf16(std::max(dot, 0.0f)));
      }
      EXPECT_TRUE(bits_equal(d.scores[i * 7 + t], round_to_bf16(sum))) << "i=" << i << " t=" << t;
      EXPECT_EQ(d.scores[i * 7 + t], round_to_bf16(d.scores[i * 7 + t])) << "a bf16 value";
    }
  }
}

TEST_P(V4AttentionTest, IndexerMatchesReferenceAndSelectsConsistently) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 100;
  for (int32_t head_dim : {8, 20, 128}) {
    for (int32_t n_heads : {1, 3, 16}) {
      for (int64_t n_keys : {0, 1, 17, 300}) {
        for (int64_t top_k : {1, 16, 512}) {
          for (bool round_bf16 : {false, true}) {
            const int64_t n_q = 5;
            IndexerData d = make_indexer(n_q, n_heads, head_dim, n_keys, top_k, ++seed);
            d.args.round_bf16 = round_bf16;
            indexer_topk(isa, pool, d.args);
            IndexerData r = make_indexer(n_q, n_heads, head_dim, n_keys, top_k, seed);
            r.args.round_bf16 = round_bf16;
            indexer_topk(Isa::reference, pool, r.args);
            const std::string what = std::string(isa_name(isa)) + " head_dim=" + std::to_string(head_dim) +
                                     " heads=" + std::to_string(n_heads) + " keys=" + std::to_string(n_keys) +
                                     " top_k=" + std::to_string(top_k) + (round_bf16 ? " bf16" : "");
            for (int64_t i = 0; i < n_q; ++i) {
              const int64_t n_vis = std::min(d.n_visible[i], n_keys);
              for (int64_t t = 0; t < n_keys; ++t) {
                const float got = d.scores[i * n_keys + t], want = r.scores[i * n_keys + t];
                if (t >= n_vis) {
                  ASSERT_EQ(got, -INFINITY) << what;
                  continue;
                }
                ASSERT_LE(std::fabs(double{got} - want), indexer_tol(d, i, t, round_bf16))
                    << what << " query " << i << " entry " << t << ": " << got << " vs " << want;
              }
              // The selection is exactly top-k of the path's own scores ...
              const int64_t k = std::min(top_k, n_vis);
              std::vector<int32_t> own(static_cast<size_t>(std::max<int64_t>(1, k)));
              if (k > 0) topk(Isa::reference, &d.scores[i * n_keys], n_vis, k, own.data(), nullptr);
              for (int64_t s = 0; s < top_k; ++s) {
                ASSERT_EQ(d.top[i * top_k + s], s < k ? own[s] : -1)
                    << what << " query " << i << " slot " << s;
              }
              // ... and differs from the reference's only where reference scores are within tolerance.
              std::set<int32_t> ref_sel(r.top.begin() + i * top_k, r.top.begin() + i * top_k + k);
              const float kth = k > 0 ? r.scores[i * n_keys + r.top[i * top_k + k - 1]] : 0.0f;
              for (int64_t s = 0; s < k; ++s) {
                const int32_t t = d.top[i * top_k + s];
                if (ref_sel.count(t) == 0) {
                  EXPECT_GE(double{r.scores[i * n_keys + t]} + 2 * indexer_tol(d, i, t, round_bf16), kth)
                      << what;
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(V4AttentionTest, IndexerTiesGoToTheLowerEntryAndQueriesAreIndependent) {
  const Isa isa = GetParam();
  ThreadPool pool(3);
  // Identical keys give identical scores: the selection is the lowest indices.
  IndexerData d = make_indexer(4, 4, 32, 40, 8, 9);
  for (int64_t t = 1; t < 40; ++t) std::memcpy(&d.keys[t * d.args.ldk], &d.keys[0], 32 * sizeof(float));
  for (auto& v : d.n_visible) v = 40;
  indexer_topk(isa, pool, d.args);
  for (int64_t i = 0; i < 4; ++i)
    for (int32_t s = 0; s < 8; ++s) EXPECT_EQ(d.top[i * 8 + s], s) << "query " << i;
  // Query i alone (n_q = 1) gives the same bits and selection as inside the batch.
  IndexerData b = make_indexer(6, 8, 128, 200, 16, 10);
  indexer_topk(isa, pool, b.args);
  for (int64_t i = 0; i < 6; ++i) {
    IndexerArgs one = b.args;
    std::vector<float> scores(200);
    std::vector<int32_t> top(16);
    one.q += i * 8 * 128;
    one.weights += i * 8;
    one.n_visible += i;
    one.n_q = 1;
    one.scores = scores.data();
    one.top_idx = top.data();
    indexer_topk(isa, pool, one);
    ASSERT_EQ(std::memcmp(scores.data(), &b.scores[i * 200], 200 * sizeof(float)), 0) << "query " << i;
    ASSERT_EQ(std::memcmp(top.data(), &b.top[i * 16], 16 * sizeof(int32_t)), 0) << "query " << i;
  }
}

// Paged keys (IndexerArgs::key_block_table): the keys copied to shuffled blocks of a larger pool
// whose other rows are NaN give the flat call's scores and selection bit for bit, over a sweep
// that cuts the thread grains (64 entries) and the blocks at different places.
TEST_P(V4AttentionTest, IndexerPagedKeysGiveTheFlatResultBitwise) {
  const Isa isa = GetParam();
  ThreadPool pool(3);
  uint32_t seed = 500;
  for (int64_t n_q : {1, 4}) {
    for (int64_t n_keys : {0, 1, 37, 200}) {
      for (int64_t per_block : {1, 7, 32}) {
        for (bool round_bf16 : {false, true}) {
          IndexerData flat = make_indexer(n_q, 8, 64, n_keys, 16, ++seed);
          flat.args.round_bf16 = round_bf16;
          IndexerData paged = make_indexer(n_q, 8, 64, n_keys, 16, seed);
          paged.args.round_bf16 = round_bf16;
          const int64_t ldk = flat.args.ldk, n_used = (n_keys + per_block - 1) / per_block;
          const int32_t n_blocks = static_cast<int32_t>(n_used + 3);
          std::vector<int32_t> table(static_cast<size_t>(n_blocks));
          for (int32_t b = 0; b < n_blocks; ++b) table[b] = b;
          std::shuffle(table.begin(), table.end(), std::mt19937(seed));
          std::vector<float> blocks(static_cast<size_t>(n_blocks * per_block * ldk),
                                    std::numeric_limits<float>::quiet_NaN());
          for (int64_t t = 0; t < n_keys; ++t) {
            const int64_t row = int64_t{table[t / per_block]} * per_block + t % per_block;
            std::copy_n(&flat.keys[t * ldk], ldk, &blocks[row * ldk]);
          }
          paged.args.keys = blocks.data();
          paged.args.key_block_table = table.data();
          paged.args.keys_per_block = per_block;
          indexer_topk(isa, pool, flat.args);
          indexer_topk(isa, pool, paged.args);
          const std::string what = "n_q " + std::to_string(n_q) + " n_keys " + std::to_string(n_keys) +
                                   " per_block " + std::to_string(per_block) + " bf16 " +
                                   std::to_string(round_bf16);
          ASSERT_EQ(std::memcmp(flat.scores.data(), paged.scores.data(), flat.scores.size() * sizeof(float)),
                    0)
              << what;
          ASSERT_EQ(flat.top, paged.top) << what;
        }
      }
    }
  }
}

// ---------------- sparse attention ----------------

struct SparseData {
  std::vector<float> q, kv_win, kv_comp, sink, out;
  std::vector<int32_t> idx_win, idx_comp;
  SparseAttentionArgs args;
};

SparseData make_sparse(int64_t n_q, int32_t n_heads, int32_t d, int64_t n_win_slots, int64_t n_comp_slots,
                       int64_t n_win_rows, int64_t n_comp_rows, bool with_sink, uint32_t seed) {
  SparseData s;
  s.q = random_normal(static_cast<size_t>(n_q * n_heads * d), seed, 0.5f);
  const int64_t ld = d + 1;
  s.kv_win = random_normal(static_cast<size_t>(std::max<int64_t>(1, n_win_rows) * ld), seed + 1);
  s.kv_comp = random_normal(static_cast<size_t>(std::max<int64_t>(1, n_comp_rows) * ld), seed + 2);
  s.sink = random_normal(static_cast<size_t>(n_heads), seed + 3, 2.0f);
  std::mt19937 rng(seed + 4);
  // Slots: random rows, about one in six empty (−1).
  auto fill = [&](std::vector<int32_t>& idx, int64_t n_slots, int64_t n_rows) {
    idx.resize(static_cast<size_t>(std::max<int64_t>(1, n_q * n_slots)));
    for (auto& v : idx) {
      const int64_t r = std::uniform_int_distribution<int64_t>(-1, std::max<int64_t>(0, n_rows - 1))(rng);
      v = n_rows == 0 || std::uniform_int_distribution<int>(0, 5)(rng) == 0
              ? -1
              : static_cast<int32_t>(std::max<int64_t>(r, 0));
    }
  };
  fill(s.idx_win, n_win_slots, n_win_rows);
  fill(s.idx_comp, n_comp_slots, n_comp_rows);
  s.out.assign(static_cast<size_t>(std::max<int64_t>(1, n_q * n_heads * d)), -3.0f);
  s.args.q = s.q.data();
  s.args.n_q = n_q;
  s.args.n_heads = n_heads;
  s.args.d = d;
  s.args.window = {s.kv_win.data(), ld, s.idx_win.data(), n_win_slots};
  s.args.compressed = {s.kv_comp.data(), ld, s.idx_comp.data(), n_comp_slots};
  s.args.sink = with_sink ? s.sink.data() : nullptr;
  s.args.scale = 1.0f / std::sqrt(static_cast<float>(d));
  s.args.out = s.out.data();
  return s;
}

// The reference against the formula in f64 (no bf16 rounding): softmax with the sink only in
// the denominator, values = keys.
TEST(SparseAttention, ReferenceMatchesTheSpecFormula) {
  SparseData s = make_sparse(2, 3, 12, 6, 5, 10, 8, true, 20);
  s.args.round_probs_bf16 = false;
  ThreadPool pool(1);
  sparse_attention(Isa::reference, pool, s.args);
  for (int64_t i = 0; i < 2; ++i) {
    for (int32_t h = 0; h < 3; ++h) {
      std::vector<const float*> rows;
      for (int64_t j = 0; j < 6; ++j)
        if (s.idx_win[i * 6 + j] >= 0) rows.push_back(&s.kv_win[s.idx_win[i * 6 + j] * 13]);
      for (int64_t j = 0; j < 5; ++j)
        if (s.idx_comp[i * 5 + j] >= 0) rows.push_back(&s.kv_comp[s.idx_comp[i * 5 + j] * 13]);
      std::vector<double> sc;
      double mx = -INFINITY;
      for (const float* r : rows) {
        double dot = 0;
        for (int c = 0; c < 12; ++c) dot += double{s.q[(i * 3 + h) * 12 + c]} * r[c];
        sc.push_back(dot * s.args.scale);
        mx = std::max(mx, sc.back());
      }
      double den = std::exp(double{s.sink[h]} - mx);
      for (double v : sc) den += std::exp(v - mx);
      for (int c = 0; c < 12; ++c) {
        double want = 0;
        for (size_t j = 0; j < rows.size(); ++j) want += std::exp(sc[j] - mx) / den * rows[j][c];
        EXPECT_NEAR(s.out[(i * 3 + h) * 12 + c], want, 1e-5) << "i=" << i << " h=" << h << " c=" << c;
      }
    }
  }
}

// Tolerance: the paths differ in (1) the score dot products (|Δs_j| ≤ 2 · scale · d · 2^-24 ·
// Σ|q kv_j|, i.e. relative change Δs_j in e_j), (2) exp (≤ 2 ulp), (3) the FMA chain of the
// weighted sum (≤ n_keys · 2^-23 · Σ e_j |v_j| / sum) and (4) with bf16 rounding, an e_j that
// lies within those perturbations of a bf16 rounding boundary may round the other way: one bf16
// ulp (2^-8 relative) of that key's term. Bound per output channel, with P_j = e_j / sum:
//   Σ_j P_j |v_j| · (2·|Δs_j| + (n_keys + 8) · 2^-23 + [bf16] 2^-8 · 2), times 2 of slack.
TEST_P(V4AttentionTest, SparseAttentionMatchesReference) {
  const Isa isa = GetParam();
  ThreadPool pool(2);
  uint32_t seed = 200;
  for (int32_t d : {8, 15, 64, 512}) {
    for (const auto& [n_win, n_comp] : {std::pair<int64_t, int64_t>{16, 0}, {16, 7}, {0, 9}, {3, 40}}) {
      for (bool round_bf16 : {false, true}) {
        for (bool with_sink : {false, true}) {
          const int64_t n_q = 3;
          const int32_t n_heads = d == 512 ? 2 : 4;
          SparseData s = make_sparse(n_q, n_heads, d, n_win, n_comp, 16, 50, with_sink, ++seed);
          s.args.round_probs_bf16 = round_bf16;
          sparse_attention(isa, pool, s.args);
          SparseData r = make_sparse(n_q, n_heads, d, n_win, n_comp, 16, 50, with_sink, seed);
          r.args.round_probs_bf16 = round_bf16;
          sparse_attention(Isa::reference, pool, r.args);
          for (int64_t i = 0; i < n_q; ++i) {
            for (int32_t h = 0; h < n_heads; ++h) {
              // Exact probabilities in f64 for the bound.
              std::vector<const float*> rows;
              for (int64_t j = 0; j < n_win; ++j)
                if (s.idx_win[i * n_win + j] >= 0)
                  rows.push_back(&s.kv_win[s.idx_win[i * n_win + j] * (d + 1)]);
              for (int64_t j = 0; j < n_comp; ++j)
                if (s.idx_comp[i * n_comp + j] >= 0)
                  rows.push_back(&s.kv_comp[s.idx_comp[i * n_comp + j] * (d + 1)]);
              const float* q = &s.q[(i * n_heads + h) * d];
              std::vector<double> sc, ds;
              double mx = -INFINITY;
              for (const float* row : rows) {
                double dot = 0, abs_dot = 0;
                for (int c = 0; c < d; ++c) {
                  dot += double{q[c]} * row[c];
                  abs_dot += std::fabs(double{q[c]} * row[c]);
                }
                sc.push_back(dot * s.args.scale);
                ds.push_back(2.0 * s.args.scale * d * 0x1p-24 * abs_dot);
                mx = std::max(mx, sc.back());
              }
              double den = with_sink ? std::exp(double{s.sink[h]} - mx) : 0.0;
              for (double v : sc) den += std::exp(v - mx);
              const double n_keys = static_cast<double>(rows.size());
              for (int c = 0; c < d; ++c) {
                double tol = 1e-30;
                for (size_t j = 0; j < rows.size(); ++j) {
                  const double p = std::exp(sc[j] - mx) / den;
                  tol += p * std::fabs(double{rows[j][c]}) *
                         (2 * ds[j] + (n_keys + 8) * 0x1p-23 + (round_bf16 ? 2 * 0x1p-8 : 0.0));
                }
                tol *= 2;
                const float got = s.out[(i * n_heads + h) * d + c], want = r.out[(i * n_heads + h) * d + c];
                ASSERT_LE(std::fabs(double{got} - want), tol)
                    << isa_name(isa) << " d=" << d << " window=" << n_win << " compressed=" << n_comp
                    << (round_bf16 ? " bf16" : "") << (with_sink ? " sink" : "") << " q" << i << " h" << h
                    << " c" << c << ": " << got << " vs " << want;
                if (rows.empty()) {
                  ASSERT_EQ(got, 0.0f) << "no keys -> zero output";
                }
              }
            }
          }
        }
      }
    }
  }
}

TEST_P(V4AttentionTest, SparseAttentionUnitsIndependentOfTheirBatch) {
  const Isa isa = GetParam();
  const int64_t n_q = 5;
  const int32_t n_heads = 10, d = 64;  // 10 heads: tiles of 4, 4, then single heads
  SparseData s = make_sparse(n_q, n_heads, d, 16, 24, 16, 60, true, 300);
  for (int n_threads : {1, 2, 3, 8}) {  // 8 > n_q: heads split over tasks
    ThreadPool pool(n_threads);
    SparseData b = make_sparse(n_q, n_heads, d, 16, 24, 16, 60, true, 300);
    sparse_attention(isa, pool, b.args);
    for (int64_t i = 0; i < n_q; ++i) {
      SparseAttentionArgs one = b.args;
      std::vector<float> out(static_cast<size_t>(n_heads * d));
      one.q += i * n_heads * d;
      one.window.idx += i * one.window.n_idx;
      one.compressed.idx += i * one.compressed.n_idx;
      one.n_q = 1;
      one.out = out.data();
      sparse_attention(isa, pool, one);
      ASSERT_EQ(std::memcmp(out.data(), &b.out[i * n_heads * d], out.size() * sizeof(float)), 0)
          << isa_name(isa) << " threads=" << n_threads << " query " << i;
    }
  }
  // Heads rotated by one (with their sinks): every head now sits at another place in another
  // head tile (x86: 4-head tiles and single-head leftovers) and must give the same bits.
  ThreadPool pool(1);
  SparseData b = make_sparse(n_q, n_heads, d, 16, 24, 16, 60, true, 300);
  sparse_attention(isa, pool, b.args);
  SparseData r = make_sparse(n_q, n_heads, d, 16, 24, 16, 60, true, 300);
  for (int64_t i = 0; i < n_q; ++i) {
    for (int32_t h = 0; h < n_heads; ++h) {
      const int32_t to = (h + 1) % n_heads;
      std::memcpy(&r.q[(i * n_heads + to) * d], &b.q[(i * n_heads + h) * d], d * sizeof(float));
      r.sink[to] = b.sink[h];
    }
  }
  sparse_attention(isa, pool, r.args);
  for (int64_t i = 0; i < n_q; ++i) {
    for (int32_t h = 0; h < n_heads; ++h) {
      const int32_t to = (h + 1) % n_heads;
      ASSERT_EQ(std::memcmp(&r.out[(i * n_heads + to) * d], &b.out[(i * n_heads + h) * d], d * sizeof(float)),
                0)
          << isa_name(isa) << " query " << i << " head " << h << " moved to " << to;
    }
  }
}

TEST_P(V4AttentionTest, SparseAttentionSinkOnlyShrinksTheOutput) {
  // All keys equal: without a sink the output is that key; a sink logit σ scales it by
  // n / (n + e^(σ − s)); σ = −inf (no sink) restores it.
  const Isa isa = GetParam();
  ThreadPool pool(1);
  SparseData s = make_sparse(1, 1, 16, 4, 0, 1, 0, true, 400);
  for (auto& v : s.idx_win) v = 0;
  s.args.round_probs_bf16 = false;
  const float* key = s.kv_win.data();
  double score = 0;
  for (int c = 0; c < 16; ++c) score += double{s.q[c]} * key[c];
  score *= s.args.scale;
  s.sink[0] = static_cast<float>(score);  // e^(σ − m) = 1: output = 4/5 of the key
  sparse_attention(isa, pool, s.args);
  for (int c = 0; c < 16; ++c) EXPECT_NEAR(s.out[c], 0.8 * key[c], 1e-5 * std::fabs(key[c]) + 1e-7) << c;
  s.sink[0] = -INFINITY;
  sparse_attention(isa, pool, s.args);
  for (int c = 0; c < 16; ++c) EXPECT_NEAR(s.out[c], key[c], 1e-5 * std::fabs(key[c]) + 1e-7) << c;
}

INSTANTIATE_TEST_SUITE_P(AllIsas, V4AttentionTest, ::testing::ValuesIn(kAllIsas),
                         [](const ::testing::TestParamInfo<Isa>& p) {
                           return std::string(isa_name(p.param));
                         });

}  // namespace
}  // namespace ds
