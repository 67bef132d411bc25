// DeepSeek-V4 forward on the generated tiny checkpoint (make-model --arch deepseek_v4 --preset
// tiny, FP8 + FP4 experts): chunk invariance, batch invariance, state-slot errors, and agreement
// with the float64 numpy reference (tests/reference/deepseek_v4_ref.py) in its --no-bf16 mode
// (tight bound) and its default mode (loose bound + argmax).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "model/deepseek_v4.h"
#include "model/v4_test_support.h"

namespace ds {
namespace {

using namespace v4_test;  // NOLINT: the tiny checkpoint and reference helpers

struct RunOutput {
  std::vector<float> logits;  // [n, vocab]
  std::vector<float> mtp;     // [n - 1, vocab]
};

// Runs ids as chunks of the given sizes (the rest as one last chunk), then the MTP rows in the
// same chunking; sequence uses blocks [slot·8, slot·8 + 8) and state slot `slot`.
RunOutput run(DeepSeekV4& m, const std::vector<int32_t>& ids, std::vector<int> chunks, int slot = 0,
              bool reversed_blocks = false) {
  SequenceState seq;
  for (int b = 0; b < 8; ++b) seq.block_table.push_back(slot * 8 + (reversed_blocks ? 7 - b : b));
  seq.state_slot = slot;
  int sum = 0;
  for (int c : chunks) sum += c;
  if (sum < static_cast<int>(ids.size())) chunks.push_back(static_cast<int>(ids.size()) - sum);
  RunOutput r;
  LogitsOutput out;
  size_t at = 0;
  for (int c : chunks) {
    ForwardRequest req{&seq, {ids.data() + at, static_cast<size_t>(c)}, true};
    Status st = m.forward({&req, 1}, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    r.logits.insert(r.logits.end(), out.logits.data(), out.logits.data() + out.logits.numel());
    at += static_cast<size_t>(c);
  }
  at = 0;
  for (int c : chunks) {
    const size_t n = std::min(static_cast<size_t>(c), ids.size() - 1 - at);
    if (n == 0) break;
    MtpRequest req{&seq, {ids.data() + at + 1, n}, nullptr};
    Status st = m.forward_mtp({&req, 1}, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    r.mtp.insert(r.mtp.end(), out.logits.data(), out.logits.data() + out.logits.numel());
    at += n;
  }
  return r;
}

TEST(V4Model, ChunkingIsBitwiseInvariant) {
  auto m = load();
  ASSERT_TRUE(m);
  const auto ids = test_ids();
  const RunOutput one = run(*m, ids, {});
  const RunOutput steps = run(*m, ids, std::vector<int>(ids.size(), 1));
  const RunOutput split = run(*m, ids, {5, 3, 17, 1, 9});
  ASSERT_EQ(one.logits.size(), ids.size() * 129280);
  ASSERT_EQ(one.mtp.size(), (ids.size() - 1) * 129280);
  EXPECT_TRUE(one.logits == steps.logits);
  EXPECT_TRUE(one.logits == split.logits);
  EXPECT_TRUE(one.mtp == steps.mtp);
  EXPECT_TRUE(one.mtp == split.mtp);
}

TEST(V4Model, BatchOfSequencesEqualsEachAlone) {
  auto m = load();
  ASSERT_TRUE(m);
  const std::vector<std::vector<int32_t>> ids{test_ids(40, 1), test_ids(40, 2), test_ids(40, 3)};
  std::vector<RunOutput> alone;
  for (const auto& s : ids) alone.push_back(run(*m, s, {}));
  // Together: chunks of 7 for all three in each forward call, each in its own slot and blocks.
  std::vector<SequenceState> seqs(3);
  for (int s = 0; s < 3; ++s) {
    for (int b = 0; b < 8; ++b) seqs[s].block_table.push_back(s * 8 + b);
    seqs[s].state_slot = s;
  }
  std::vector<std::vector<float>> got(3);
  LogitsOutput out;
  for (size_t at = 0; at < 40; at += 7) {
    const size_t n = std::min<size_t>(7, 40 - at);
    std::vector<ForwardRequest> reqs;
    for (int s = 0; s < 3; ++s) reqs.push_back(ForwardRequest{&seqs[s], {ids[s].data() + at, n}, true});
    ASSERT_TRUE(m->forward(reqs, out).ok());
    for (int s = 0; s < 3; ++s) {
      const float* b = out.logits.row(out.row_begin[s]);
      got[s].insert(got[s].end(), b, b + (out.row_begin[s + 1] - out.row_begin[s]) * 129280);
    }
  }
  for (int s = 0; s < 3; ++s) EXPECT_TRUE(got[s] == alone[s].logits) << "sequence " << s;
}

// Compressed entries and indexer keys live in the sequence's blocks: another block order (and
// another slot) must give the same bits, and a block size that splits a group is refused.
TEST(V4Model, PagedEntriesFollowTheBlockTable) {
  auto m = load();
  ASSERT_TRUE(m);
  const auto ids = test_ids();
  const RunOutput a = run(*m, ids, {9}, 0, false);
  const RunOutput b = run(*m, ids, {9}, 2, true);
  EXPECT_TRUE(a.logits == b.logits);
  EXPECT_TRUE(a.mtp == b.mtp);
  EXPECT_EQ(m->kv_cache_layout().block_size_multiple, 16);  // lcm of the tiny ratios 4 and 16
  KvCacheConfig bad{8, 64, 1};
  EXPECT_EQ(m->init_kv_cache(bad).code(), ErrorCode::invalid_argument);
}

// The AVX-512 / AVX2 paths differ from the reference only in summation order, exp and FMA
// contraction (f32 noise); without the bf16 points that stays at f32 noise through the model
// (same bound as against the float64 reference).
TEST(V4Model, VectorIsaMatchesReferenceIsa) {
  const Isa isa = best_isa();
  if (isa == Isa::reference) GTEST_SKIP() << "no vector ISA on this CPU";
  V4Numerics num;
  num.bf16_points = 0;
  auto ref_m = load(num, Isa::reference);
  auto vec_m = load(num, isa);
  ASSERT_TRUE(ref_m && vec_m);
  const auto ids = test_ids();
  const RunOutput r = run(*ref_m, ids, {});
  const RunOutput v = run(*vec_m, ids, {});
  double max_abs = 0, max_ref = 0;
  for (size_t i = 0; i < r.logits.size(); ++i) {
    max_abs = std::max(max_abs, static_cast<double>(std::abs(r.logits[i] - v.logits[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::abs(r.logits[i])));
  }
  std::printf("%s vs reference ISA (no bf16): max |d| %.3g (max %.3g)\n", std::string(isa_name(isa)).c_str(),
              max_abs, max_ref);
  EXPECT_LE(max_abs, 1.5e-5 * max_ref + 2e-6);
}

// Numerics option bf16_activations=on (docs/numerics.md) on V4: the FP8 projections, the FP4 routed
// experts (x rounded once per job, h where it is computed: MatmulArgs::x_bf16) and the bf16 head all
// take it. Chunking stays bitwise invariant on every path. Against the exact forward, and between
// paths, single logits can move far (V4's top-k choices flip under a bf16 rounding or another
// summation order, docs/numerics.md "Part 0"), so the checks are per row: the rows' argmax agree and
// the typical (median) logit moves by a bf16-sized amount; a wrong rounded row would move every logit
// by its own size.
TEST(V4Model, Bf16ActivationsAreChunkInvariantAndCloseOnEveryPath) {
  V4Numerics num;
  num.bf16_points = 0;
  const auto ids = test_ids();
  auto exact_m = load(num, Isa::reference);
  ASSERT_TRUE(exact_m);
  const RunOutput exact = run(*exact_m, ids, {});
  const size_t vocab = exact.logits.size() / ids.size();
  for (Isa isa : supported_isas()) {
    auto m = load(num, isa, true, /*bf16_activations=*/true);
    ASSERT_TRUE(m);
    const RunOutput got = run(*m, ids, {});
    EXPECT_EQ(run(*m, ids, {5, 4, 2}, 1).logits, got.logits) << isa_name(isa);
    std::vector<double> diffs;
    double max_ref = 0;
    size_t argmax_equal = 0;
    for (size_t r = 0; r < ids.size(); ++r) {
      const float* e = exact.logits.data() + r * vocab;
      const float* g = got.logits.data() + r * vocab;
      argmax_equal += std::max_element(e, e + vocab) - e == std::max_element(g, g + vocab) - g;
      for (size_t v = 0; v < vocab; ++v) {
        diffs.push_back(std::abs(static_cast<double>(e[v]) - g[v]));
        max_ref = std::max(max_ref, static_cast<double>(std::abs(e[v])));
      }
    }
    std::nth_element(diffs.begin(), diffs.begin() + diffs.size() / 2, diffs.end());
    const double median = diffs[diffs.size() / 2];
    std::printf(
        "%s bf16_activations vs exact: argmax equal %zu of %zu rows, median |d| %.3g (max |logit| %.3g)\n",
        std::string(isa_name(isa)).c_str(), argmax_equal, ids.size(), median, max_ref);
    EXPECT_GE(argmax_equal * 10, ids.size() * 8) << isa_name(isa);
    EXPECT_LT(median, 0x1p-8 * max_ref) << isa_name(isa);
    EXPECT_GT(median, 1e-7 * max_ref) << isa_name(isa) << ": the option changed nothing";
  }
}

TEST(V4Model, StateSlotErrorsAreBadInput) {
  auto m = load();
  ASSERT_TRUE(m);
  const auto ids = test_ids(8);
  LogitsOutput out;
  SequenceState a;
  a.block_table = {0, 1};
  a.state_slot = 9;  // outside [0, 4)
  ForwardRequest r{&a, {ids.data(), 4}, false};
  EXPECT_EQ(m->forward({&r, 1}, out).code(), ErrorCode::model_bad_input);
  a.state_slot = 0;
  ASSERT_TRUE(m->forward({&r, 1}, out).ok());
  // Rolled back below what the slot holds: V4 state cannot follow.
  a.n_tokens = 2;
  ForwardRequest r2{&a, {ids.data() + 2, 2}, false};
  EXPECT_EQ(m->forward({&r2, 1}, out).code(), ErrorCode::model_bad_input);
  // Two sequences naming one slot in a call.
  SequenceState b, c;
  b.block_table = {2};
  c.block_table = {3};
  b.state_slot = c.state_slot = 1;
  std::vector<ForwardRequest> two{{&b, {ids.data(), 1}, false}, {&c, {ids.data(), 1}, false}};
  EXPECT_EQ(m->forward(two, out).code(), ErrorCode::model_bad_input);
  // An empty batch is fine and yields no rows.
  ASSERT_TRUE(m->forward({}, out).ok());
  EXPECT_EQ(out.logits.numel(), 0);
  EXPECT_EQ(out.row_begin, std::vector<int64_t>{0});
}

// Roll-back inside journaled chunks (model/v4_chunk_undo.h): rings, CSA/HCA compressor groups,
// the indexer's key compressor and the counts come back to what a run without the rejected rows
// has, bit for bit, across group completions and window wraps.
TEST(V4Model, TruncatingJournaledChunksEqualsARunWithoutTheRejectedRows) {
  auto m = load({}, best_isa(), /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->supports_truncation());
  const auto ids = test_ids(70);
  SequenceState plain;
  for (int b = 0; b < 8; ++b) plain.block_table.push_back(b);
  plain.state_slot = 0;
  LogitsOutput out;
  ForwardRequest all{&plain, {ids.data(), ids.size()}, true};
  const Status st = m->forward({&all, 1}, out);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const std::vector<float> want(out.logits.data(), out.logits.data() + out.logits.numel());
  const std::vector<float> got = run_with_rejections(*m, ids, 9, 1);
  ASSERT_EQ(got.size(), want.size());
  int64_t first_diff = -1;
  for (size_t i = 0; i < got.size() && first_diff < 0; ++i)
    if (got[i] != want[i]) first_diff = static_cast<int64_t>(i) / 129280;
  EXPECT_EQ(first_diff, -1) << "first differing row";
  // Without may_truncate the slot still refuses to go back (the journal is per chunk).
  SequenceState s;
  for (int b = 0; b < 8; ++b) s.block_table.push_back(16 + b);
  s.state_slot = 2;
  ForwardRequest r{&s, {ids.data(), 6}, false};
  ASSERT_TRUE(m->forward({&r, 1}, out).ok());
  s.n_tokens = 4;
  ForwardRequest again{&s, {ids.data() + 4, 1}, false};
  EXPECT_EQ(m->forward({&again, 1}, out).code(), ErrorCode::model_bad_input);
}

// The MTP layer's rows over positions [from, to) of seq (main forward done), one chunk.
std::vector<float> mtp_rows(DeepSeekV4& m, SequenceState& seq, const std::vector<int32_t>& ids, int64_t from,
                            int64_t to) {
  seq.n_mtp_tokens = from;
  MtpRequest req{&seq, {ids.data() + from + 1, static_cast<size_t>(to - from)}, nullptr};
  LogitsOutput out;
  const Status st = m.forward_mtp({&req, 1}, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return std::vector<float>(out.logits.data(), out.logits.data() + out.logits.numel());
}

// MTP drafting (docs/speculative.md, V4): chains of draft rows past the consumed positions, fed the
// layer's own output streams, overwrite ring slots the next real rows still read (the 16-token
// window wraps); the next real MTP call puts them back, so the MTP logits equal those of a run that
// never drafted, bit for bit. A layer that skips positions (drafting was off) restarts without
// them: rows a window past the restart equal the plain run's again.
TEST(V4Model, MtpDraftRowsLeaveNoTrace) {
  auto m = load({}, best_isa());
  ASSERT_TRUE(m);
  EXPECT_TRUE(m->supports_mtp_drafting());
  const auto ids = test_ids(70);
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<SequenceState> seqs(3);
  LogitsOutput out;
  for (int s = 0; s < 3; ++s) {
    for (int b = 0; b < 8; ++b) seqs[s].block_table.push_back(s * 8 + b);
    seqs[s].state_slot = s;
    ForwardRequest all{&seqs[s], {ids.data(), ids.size()}, false};
    ASSERT_TRUE(m->forward({&all, 1}, out).ok());
  }
  const int64_t vocab = m->config().vocab_size;
  std::vector<float> plain, drafted;
  std::mt19937 rng(11);
  for (int64_t at = 0; at < n - 1;) {
    const int64_t step = at == 0 ? 20 : 1 + at % 3;
    const int64_t to = std::min(at + step, n - 1);
    const std::vector<float> a = mtp_rows(*m, seqs[0], ids, at, to), b = mtp_rows(*m, seqs[1], ids, at, to);
    plain.insert(plain.end(), a.begin(), a.end());
    drafted.insert(drafted.end(), b.begin(), b.end());
    for (int j = 0; j < 3; ++j) {  // a chain of junk drafts from `to` on, then back to `to`
      const int32_t junk = static_cast<int32_t>(rng() % vocab);
      MtpRequest d{&seqs[1], {&junk, 1}, nullptr};
      d.draft = true;
      d.all_logits = false;
      const Status st = m->forward_mtp({&d, 1}, out);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(out.logits.numel(), vocab);
    }
    seqs[1].n_mtp_tokens = to;
    at = to;
  }
  ASSERT_EQ(plain.size(), drafted.size());
  int64_t first_diff = -1;
  for (size_t i = 0; i < plain.size() && first_diff < 0; ++i)
    if (plain[i] != drafted[i]) first_diff = static_cast<int64_t>(i) / vocab;
  EXPECT_EQ(first_diff, -1) << "first differing MTP row";
  // A draft row needs the MTP output of the position before it.
  const int32_t tok = 5;
  MtpRequest bad{&seqs[1], {&tok, 1}, nullptr};
  bad.draft = true;
  seqs[1].n_mtp_tokens = 40;
  EXPECT_EQ(m->forward_mtp({&bad, 1}, out).code(), ErrorCode::model_bad_input);
  // Skipping positions 20..44: rows from 45 + 15 on see only positions >= 45 in the ring.
  (void)mtp_rows(*m, seqs[2], ids, 0, 20);
  const std::vector<float> restarted = mtp_rows(*m, seqs[2], ids, 45, n - 1);
  for (int64_t p = 45; p < n - 1; ++p) {
    const bool same = std::equal(restarted.begin() + (p - 45) * vocab, restarted.begin() + (p - 44) * vocab,
                                 plain.begin() + p * vocab);
    if (p >= 60) {
      EXPECT_TRUE(same) << "row " << p;
    }
    if (p == 45) {
      EXPECT_FALSE(same) << "row 45 lost its window";
    }
  }
  // Going back below what the layer consumed is refused.
  EXPECT_EQ(m->forward_mtp({}, out).code(), ErrorCode::ok);
  seqs[2].n_mtp_tokens = 30;
  MtpRequest back{&seqs[2], {ids.data() + 31, 1}, nullptr};
  EXPECT_EQ(m->forward_mtp({&back, 1}, out).code(), ErrorCode::model_bad_input);
}

// f32 engine vs float64 reference, both without the bf16 rounding points: the difference is
// f32 rounding noise. The reference README measures 4.4e-7 for linear-output-only f32 noise on
// this model; the engine also runs norms, mHC, softmaxes and above all its RoPE angles in f32
// (kernels/rope.h: (float)pos · inv_freq, an angle error up to pos·f·2^-24 rad, ~4e-6 relative
// at position 69), which it feeds through 6 attention layers and the window/compressed caches.
// Measured 3.0e-5 (5.4e-6 relative) for the logits, 1.5e-5 for MTP; the bound is 1.5e-5·max|ref|
// + 2e-6 (about 2.7x headroom). A logic error (wrong key, entry, expert or rotation) moves logits
// by 1e-2 or more (the reference's self-test: dropping top-k moves them by 1.3).
TEST(V4Model, MatchesReferenceWithoutBf16Points) {
  V4Numerics num;
  num.bf16_points = 0;
  auto m = load(num);
  ASSERT_TRUE(m);
  const auto ids = test_ids();
  const std::string dir = ::testing::TempDir() + "/ds_v4_ref_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  if (!run_reference(ids, "--no-bf16", dir + "/ref.npy", dir + "/mtp.npy"))
    GTEST_SKIP() << "no python3/numpy";
  const RunOutput got = run(*m, ids, {21});  // prefill 21, then the rest as one chunk
  int64_t rows = 0, cols = 0;
  const std::vector<double> ref = read_npy_f64(dir + "/ref.npy", rows, cols);
  const std::vector<double> ref_mtp = read_npy_f64(dir + "/mtp.npy", rows, cols);
  const Diff d = compare(got.logits, ref, cols), dm = compare(got.mtp, ref_mtp, cols);
  std::printf("no-bf16: max |d| logits %.3g (max |ref| %.3g), mtp %.3g (max |ref| %.3g)\n", d.max_abs,
              d.max_ref, dm.max_abs, dm.max_ref);
  EXPECT_LE(d.max_abs, 1.5e-5 * d.max_ref + 2e-6);
  EXPECT_LE(dm.max_abs, 1.5e-5 * dm.max_ref + 2e-6);
  EXPECT_EQ(d.argmax_mismatch, 0);
  EXPECT_EQ(dm.argmax_mismatch, 0);
  std::filesystem::remove_all(dir);
}

// With the bf16 rounding points (production numerics) an f32-level difference sometimes lands
// on the other side of a bf16 (or FP8/FP4) rounding boundary and the one-ulp jump propagates
// through the rings and compressed entries (reference README "expect bf16 rounding flips").
// Measured on these 70 ids: median row 1.9e-2, worst row 0.36 (max |ref| 5.6); MTP median 2.2e-2,
// worst 1.27 (max |ref| 4.9). Before the first flip rows agree to < 1e-4. Checked: median row max |d| <= 0.1,
// max |d| <= 0.3·max|ref|, and the argmax agrees on every row whose reference top-2 gap exceeds twice that
// row's max |d|. A logic error moves every row after it by O(1) and fails the median.
TEST(V4Model, MatchesReferenceWithBf16PointsLoosely) {
  auto m = load();
  ASSERT_TRUE(m);
  const auto ids = test_ids();
  const std::string dir = ::testing::TempDir() + "/ds_v4_refb_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  if (!run_reference(ids, "", dir + "/ref.npy", dir + "/mtp.npy")) GTEST_SKIP() << "no python3/numpy";
  const RunOutput got = run(*m, ids, {});
  for (const char* which : {"ref", "mtp"}) {
    int64_t rows = 0, cols = 0;
    const std::vector<double> ref = read_npy_f64(dir + "/" + which + ".npy", rows, cols);
    const std::vector<float>& eng = std::string(which) == "ref" ? got.logits : got.mtp;
    ASSERT_EQ(eng.size(), ref.size());
    std::vector<double> row_max(static_cast<size_t>(rows));
    double max_abs = 0, max_ref = 0;
    int64_t decisive_mismatch = 0;
    for (int64_t r = 0; r < rows; ++r) {
      int64_t ag = 0, ar = 0;
      for (int64_t c = 0; c < cols; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        row_max[r] = std::max(row_max[r], std::abs(eng[i] - ref[i]));
        max_ref = std::max(max_ref, std::abs(ref[i]));
        if (eng[i] > eng[r * cols + ag]) ag = c;
        if (ref[i] > ref[r * cols + ar]) ar = c;
      }
      double second = -1e300;
      for (int64_t c = 0; c < cols; ++c)
        if (c != ar) second = std::max(second, ref[r * cols + c]);
      if (ref[r * cols + ar] - second > 2 * row_max[r] && ag != ar) ++decisive_mismatch;
      max_abs = std::max(max_abs, row_max[r]);
    }
    std::vector<double> sorted = row_max;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    std::printf("bf16 %s: max |d| %.3g (max |ref| %.3g), median row %.3g\n", which, max_abs, max_ref, median);
    EXPECT_LE(median, 0.1) << which;
    EXPECT_LE(max_abs, 0.3 * max_ref) << which;
    EXPECT_EQ(decisive_mismatch, 0) << which;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ds
