// SWA bounded replay on the DeepSeek-V4 model (deepinfer-features.md §6.1): a sequence that starts
// on another sequence's cached blocks rebuilds its window rings and compressor groups by replaying
// [H - W, H) with ForwardRequest::replay_end = H. Checked: the replay reads the cached entries and
// never writes the shared blocks, it is bitwise invariant to chunking and batching, it matches the
// numpy reference's replay, and misuse is model_bad_input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "model/deepseek_v4.h"
#include "model/v4_test_support.h"

namespace ds {
namespace {

using namespace v4_test;  // NOLINT: the tiny checkpoint and reference helpers

constexpr int64_t kVocab = 129280;
constexpr int32_t kBlock = 16;  // the tests' block size (load()): lcm of the tiny ratios 4 and 16

// A sequence in state slot `slot` whose block table starts with `shared` (another sequence's
// cached blocks) and continues with `own` fresh ones from block `first_own`.
SequenceState sequence(int slot, std::vector<int32_t> shared, int first_own, int own = 8) {
  SequenceState seq;
  seq.block_table = std::move(shared);
  for (int b = 0; b < own; ++b) seq.block_table.push_back(first_own + b);
  seq.state_slot = slot;
  return seq;
}

// Runs ids[seq.n_tokens, ids.size()) in chunks of the given sizes (the rest as one last chunk),
// every chunk starting below replay_end carrying it; returns all rows' logits.
std::vector<float> run_from(DeepSeekV4& m, SequenceState& seq, const std::vector<int32_t>& ids,
                            int64_t replay_end, std::vector<int> chunks) {
  int64_t left = static_cast<int64_t>(ids.size()) - seq.n_tokens;
  for (int c : chunks) left -= c;
  if (left > 0) chunks.push_back(static_cast<int>(left));
  std::vector<float> logits;
  LogitsOutput out;
  for (int c : chunks) {
    const int64_t at = seq.n_tokens;
    ForwardRequest req{
        &seq, {ids.data() + at, static_cast<size_t>(c)}, true, at < replay_end ? replay_end : 0};
    const Status st = m.forward({&req, 1}, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) return logits;
    logits.insert(logits.end(), out.logits.data(), out.logits.data() + out.logits.numel());
  }
  return logits;
}

// The rows [first, end) of a [n, vocab] logits buffer.
std::vector<float> rows(const std::vector<float>& logits, int64_t first, int64_t end) {
  return {logits.begin() + first * kVocab, logits.begin() + end * kVocab};
}

TEST(V4Replay, ReplayLengthIsTheWindow) {
  auto m = load({}, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  // tiny: window 16 >= every CSA ratio (4), so W is the window.
  EXPECT_EQ(m->kv_cache_layout().swa_replay_tokens, 16);
}

// A replay that starts at position 0 cuts nothing: it differs from the cold run only in reading
// the cached entries instead of recomputing them, so every row must match the cold run bitwise.
TEST(V4Replay, ReplayFromZeroEqualsTheColdRun) {
  auto m = load({}, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  const auto ids = test_ids(70);
  SequenceState cold = sequence(0, {}, 0);
  const std::vector<float> want = run_from(*m, cold, ids, 0, {});
  // B shares A's first block (positions [0, 16)) and replays it: H = W = 16.
  SequenceState a = sequence(1, {}, 8);
  run_from(*m, a, std::vector<int32_t>(ids.begin(), ids.begin() + 16), 0, {});
  SequenceState b = sequence(2, {a.block_table[0]}, 16);
  const std::vector<float> got = run_from(*m, b, ids, 16, {7, 9, 30});
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want);
}

// Hit H = 48, replay [32, 48): the suffix rows depend only on the hit, not on how the replay and
// the suffix are chunked or batched; the sharer's cached blocks are never written; and cutting the
// window at 32 changes the rows (the replay is not a no-op copy of the cold run).
TEST(V4Replay, ReplayIsChunkInvariantAndLeavesSharedBlocksAlone) {
  auto m = load({}, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  const auto ids = test_ids(70);
  const std::vector<int32_t> prefix(ids.begin(), ids.begin() + 48);
  SequenceState a = sequence(0, {}, 0);
  run_from(*m, a, prefix, 0, {});
  const std::vector<int32_t> shared(a.block_table.begin(), a.block_table.begin() + 3);

  std::vector<std::vector<float>> runs;
  for (const std::vector<int>& chunks : {std::vector<int>{}, {16}, {5, 11, 1, 1, 9}, {3, 20}}) {
    SequenceState b = sequence(1, shared, 8);
    b.n_tokens = 32;
    runs.push_back(run_from(*m, b, ids, 48, chunks));
    ASSERT_EQ(runs.back().size(), size_t{38} * kVocab);
  }
  for (size_t i = 1; i < runs.size(); ++i) EXPECT_TRUE(runs[i] == runs[0]) << "chunking " << i;

  SequenceState cold = sequence(2, {}, 16);
  const std::vector<float> cold_rows = rows(run_from(*m, cold, ids, 0, {}), 32, 70);
  EXPECT_FALSE(cold_rows == runs[0]) << "the window cut at 32 must change the replayed rows";

  // A continues after B replayed on A's blocks: bitwise as the cold run, as if B never ran.
  const std::vector<float> a_rest = run_from(*m, a, ids, 0, {});
  EXPECT_TRUE(a_rest == rows(cold_rows, 16, 38));
}

// Two sequences replaying the same shared blocks in one forward call (and a third decoding its own
// prefix) read the shared blocks without conflict and get what each gets alone.
TEST(V4Replay, ReplaysSharingBlocksBatchTogether) {
  auto m = load({}, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  const std::vector<int32_t> ids1 = test_ids(60, 11);
  std::vector<int32_t> ids2 = ids1;
  for (size_t i = 32; i < ids2.size(); ++i) ids2[i] = (ids1[i] * 7 + 3) % static_cast<int32_t>(kVocab);
  SequenceState a = sequence(0, {}, 0);
  run_from(*m, a, std::vector<int32_t>(ids1.begin(), ids1.begin() + 32), 0, {});
  const std::vector<int32_t> shared(a.block_table.begin(), a.block_table.begin() + 2);

  std::vector<std::vector<float>> alone;
  for (const std::vector<int32_t>* ids : {&ids1, static_cast<const std::vector<int32_t>*>(&ids2)}) {
    SequenceState s = sequence(1, shared, 8);
    s.n_tokens = 16;
    alone.push_back(run_from(*m, s, *ids, 32, {}));
  }
  SequenceState b = sequence(1, shared, 8), c = sequence(2, shared, 16);
  b.n_tokens = c.n_tokens = 16;
  std::vector<float> got_b, got_c;
  LogitsOutput out;
  for (int64_t at = 16; at < 60;) {
    const int64_t n = std::min<int64_t>(6, 60 - at);
    const int64_t replay_end = at < 32 ? 32 : 0;
    std::vector<ForwardRequest> reqs{{&b, {ids1.data() + at, static_cast<size_t>(n)}, true, replay_end},
                                     {&c, {ids2.data() + at, static_cast<size_t>(n)}, true, replay_end}};
    const Status st = m->forward(reqs, out);
    ASSERT_TRUE(st.ok()) << st.to_string();
    got_b.insert(got_b.end(), out.logits.row(out.row_begin[0]), out.logits.row(out.row_begin[1]));
    got_c.insert(got_c.end(), out.logits.row(out.row_begin[1]), out.logits.row(out.row_begin[2]));
    at += n;
  }
  EXPECT_TRUE(got_b == alone[0]);
  EXPECT_TRUE(got_c == alone[1]);
}

TEST(V4Replay, MisuseIsBadInput) {
  const auto ids = test_ids(48);
  LogitsOutput out;
  {
    auto m = load({}, Isa::reference, /*mtp_layer=*/false);
    ASSERT_TRUE(m);
    SequenceState a = sequence(0, {}, 0);
    run_from(*m, a, std::vector<int32_t>(ids.begin(), ids.begin() + 32), 0, {});
    SequenceState b = sequence(1, {a.block_table[0], a.block_table[1]}, 8);
    b.n_tokens = 16;
    const std::span<const int32_t> chunk(ids.data() + 16, 4);
    for (const int64_t bad_end :
         {int64_t{24}, int64_t{48}, int64_t{8}}) {  // not block-aligned; chunk outside
      ForwardRequest req{&b, chunk, false, bad_end};
      EXPECT_EQ(m->forward({&req, 1}, out).code(), ErrorCode::model_bad_input) << "replay_end " << bad_end;
    }
    // Without replay_end a sequence at 16 on a slot it never filled cannot start.
    ForwardRequest plain{&b, chunk, false, 0};
    EXPECT_EQ(m->forward({&plain, 1}, out).code(), ErrorCode::model_bad_input);
    ForwardRequest ok{&b, chunk, false, 32};
    EXPECT_TRUE(m->forward({&ok, 1}, out).ok());
    // No MTP state is kept without the MTP layer in the cache.
    MtpRequest mtp{&a, {ids.data() + 1, 1}, nullptr};
    EXPECT_EQ(m->forward_mtp({&mtp, 1}, out).code(), ErrorCode::model_unsupported);
  }
  {
    auto m = load();  // MTP layer kept: it is not replayed, its state starts at the replay
    ASSERT_TRUE(m);
    SequenceState a = sequence(0, {}, 0);
    run_from(*m, a, std::vector<int32_t>(ids.begin(), ids.begin() + 32), 0, {});
    SequenceState b = sequence(1, {a.block_table[0], a.block_table[1]}, 8);
    b.n_tokens = 16;
    ForwardRequest req{&b, {ids.data() + 16, 4}, false, 32};
    ASSERT_TRUE(m->forward({&req, 1}, out).ok());
    b.n_mtp_tokens = 8;  // below the replay: no MTP input there
    MtpRequest below{&b, {ids.data() + 9, 1}, nullptr};
    EXPECT_EQ(m->forward_mtp({&below, 1}, out).code(), ErrorCode::model_bad_input);
    b.n_mtp_tokens = 16;
    MtpRequest from{&b, {ids.data() + 17, 3}, nullptr};
    const Status st = m->forward_mtp({&from, 1}, out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(out.logits.numel(), 3 * m->config().vocab_size);
  }
}

// Engine vs the float64 reference's replay (deepseek_v4_ref.py --replay-hit), both without the
// bf16 rounding points: the same f32-noise bound as MatchesReferenceWithoutBf16Points (v4_model_
// test.cpp). Hit 48 of 70 ids: rows [32, 70) with the window cut at 32, the cached CSA/HCA entries
// and indexer keys below 48 read from A's blocks, top-k selection active (index_topk 8 < 12
// visible entries at the hit).
TEST(V4Replay, MatchesReferenceReplayWithoutBf16Points) {
  V4Numerics num;
  num.bf16_points = 0;
  auto m = load(num, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  const auto ids = test_ids(70);
  const std::string dir = ::testing::TempDir() + "/ds_v4_replay_ref_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  if (!run_reference(ids, "--no-bf16 --replay-hit 48 --replay-tokens 16 --chunks 16", dir + "/ref.npy",
                     dir + "/mtp.npy"))
    GTEST_SKIP() << "no python3/numpy";
  SequenceState a = sequence(0, {}, 0);
  run_from(*m, a, std::vector<int32_t>(ids.begin(), ids.begin() + 48), 0, {});
  SequenceState b = sequence(1, {a.block_table[0], a.block_table[1], a.block_table[2]}, 8);
  b.n_tokens = 32;
  const std::vector<float> got = run_from(*m, b, ids, 48, {16});
  int64_t n_rows = 0, cols = 0;
  const std::vector<double> ref = read_npy_f64(dir + "/ref.npy", n_rows, cols);
  ASSERT_EQ(n_rows, 38);
  const Diff d = compare(got, ref, cols);
  std::printf("replay no-bf16: max |d| %.3g (max |ref| %.3g)\n", d.max_abs, d.max_ref);
  EXPECT_LE(d.max_abs, 1.5e-5 * d.max_ref + 2e-6);
  EXPECT_EQ(d.argmax_mismatch, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ds
