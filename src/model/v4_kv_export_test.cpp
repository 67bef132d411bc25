// DeepSeek-V4's KV block export/import: the paged compressed entries and indexer keys of a cached
// prefix, copied into other blocks, give a replayed continuation bit-identical to replaying on
// the original blocks (the window state is rebuilt by SWA bounded replay, not exported).
#include <gtest/gtest.h>

#include <vector>

#include "model/deepseek_v4.h"
#include "model/kv_layer_done_check.h"
#include "model/v4_test_support.h"

namespace ds {
namespace {

using namespace v4_test;  // NOLINT: the tiny checkpoint helpers

std::vector<float> run_rest(DeepSeekV4& m, std::vector<int32_t> table, int slot,
                            const std::vector<int32_t>& ids, int64_t hit) {
  SequenceState seq;
  seq.block_table = std::move(table);
  seq.state_slot = slot;
  const int64_t replay = m.kv_cache_layout().swa_replay_tokens;
  seq.n_tokens = hit - replay;
  LogitsOutput out;
  ForwardRequest req{
      &seq, {ids.data() + seq.n_tokens, ids.size() - static_cast<size_t>(seq.n_tokens)}, true, hit};
  const Status st = m.forward({&req, 1}, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return std::vector<float>(out.logits.data(), out.logits.data() + out.logits.numel());
}

TEST(V4KvBlockExport, ImportedBlocksReplayBitIdentically) {
  auto m = load({}, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  const int64_t block_bytes = m->kv_block_bytes();
  ASSERT_GT(block_bytes, 0);
  const auto ids = test_ids(70);
  // A computes 48 tokens (3 blocks of 16) into blocks 0..2.
  SequenceState a;
  for (int32_t b = 0; b < 8; ++b) a.block_table.push_back(b);
  a.state_slot = 0;
  LogitsOutput out;
  ForwardRequest fill{&a, {ids.data(), 48}, false};
  ASSERT_TRUE(m->forward({&fill, 1}, out).ok());

  std::vector<std::byte> bytes(static_cast<size_t>(block_bytes));
  for (int32_t b = 0; b < 3; ++b) {
    ASSERT_TRUE(m->export_kv_block(b, bytes).ok());
    ASSERT_TRUE(m->import_kv_block(24 + b, bytes).ok());
  }
  const std::vector<float> on_original = run_rest(*m, {0, 1, 2, 8, 9}, 1, ids, 48);
  const std::vector<float> on_imported = run_rest(*m, {24, 25, 26, 10, 11}, 2, ids, 48);
  ASSERT_FALSE(on_original.empty());
  EXPECT_TRUE(on_imported == on_original);

  // Zeroed entries instead: the continuation changes, so the comparison above can fail.
  ASSERT_TRUE(m->import_kv_block(25, std::vector<std::byte>(bytes.size(), std::byte{0})).ok());
  EXPECT_FALSE(run_rest(*m, {24, 25, 26, 12, 13}, 3, ids, 48) == on_original);
  EXPECT_EQ(m->import_kv_block(1, std::vector<std::byte>(bytes.size() + 4)).code(),
            ErrorCode::model_bad_input);
}

// Layer by layer (P/D): when layer l ends, its compressed entries and indexer keys of the blocks the
// forward completes are final and no later layer's have been written yet.
TEST(V4KvBlockExport, EachLayersPagesAreFinalWhenItsLayerEnds) {
  auto m = load({}, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  const auto ids = test_ids(40);
  SequenceState seq;
  for (int32_t b = 10; b < 14; ++b) seq.block_table.push_back(b);
  seq.state_slot = 0;
  // 40 tokens in 16-token blocks: blocks 10 and 11 complete.
  kv_layer_check::expect_pages_final_as_each_layer_ends(*m, seq, ids, {10, 11});
}

}  // namespace
}  // namespace ds

namespace ds {
namespace {

using namespace v4_test;  // NOLINT: the tiny checkpoint helpers

// Runs tokens [from, to) of `ids` for `seq`; the logits of those rows.
std::vector<float> run_chunk(ModelRunner& m, SequenceState& seq, const std::vector<int32_t>& ids,
                             int64_t from, int64_t to) {
  LogitsOutput out;
  ForwardRequest req{&seq, {ids.data() + from, static_cast<size_t>(to - from)}, true};
  const Status st = m.forward({&req, 1}, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  seq.n_tokens = to;
  return std::vector<float>(out.logits.data(), out.logits.data() + out.logits.numel());
}

// P/D hands a sequence over at a block boundary: the blocks move (export/import_kv_block) and so
// does the unpaged state (window rings, compressor partial groups); the receiving sequence then
// continues bit for bit as the sender would have — unlike a prefix hit, which replays the window.
TEST(V4SequenceState, ImportedStateContinuesBitIdentically) {
  {
    auto m = load({}, Isa::reference, /*mtp_layer=*/false);
    ASSERT_TRUE(m);
    const auto ids = test_ids(70);
    SequenceState cold;
    cold.block_table = {0, 1, 2, 3, 4};
    cold.state_slot = 0;
    run_chunk(*m, cold, ids, 0, 48);
    const std::vector<float> want = run_chunk(*m, cold, ids, 48, 70);

    SequenceState sender;
    sender.block_table = {8, 9, 10};
    sender.state_slot = 1;
    run_chunk(*m, sender, ids, 0, 48);
    Result<std::vector<std::byte>> state = m->export_sequence_state(sender);
    ASSERT_TRUE(state.ok()) << state.status().to_string();
    ASSERT_FALSE(state->empty());
    EXPECT_LT(static_cast<int64_t>(state->size()), m->sequence_state_bytes());  // rows trimmed
    std::vector<std::byte> block(static_cast<size_t>(m->kv_block_bytes()));
    for (int32_t b = 0; b < 3; ++b) {
      ASSERT_TRUE(m->export_kv_block(8 + b, block).ok());
      ASSERT_TRUE(m->import_kv_block(16 + b, block).ok());
    }
    SequenceState receiver;
    receiver.block_table = {16, 17, 18, 19, 20};
    receiver.state_slot = 2;
    receiver.n_tokens = 48;
    ASSERT_TRUE(m->import_sequence_state(receiver, *state).ok());
    const std::vector<float> got = run_chunk(*m, receiver, ids, 48, 70);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_TRUE(got == want);

    // The same blocks resumed by a prefix hit's SWA replay instead: the rows differ, so the
    // comparison above can fail.
    SequenceState replayed;
    replayed.block_table = {16, 17, 18, 21, 22};
    replayed.state_slot = 3;
    const int64_t replay = m->kv_cache_layout().swa_replay_tokens;
    replayed.n_tokens = 48 - replay;
    LogitsOutput out;
    ForwardRequest req{
        &replayed, {ids.data() + replayed.n_tokens, static_cast<size_t>(70 - replayed.n_tokens)}, true, 48};
    ASSERT_TRUE(m->forward({&req, 1}, out).ok());
    const std::vector<float> tail(out.logits.data() + replay * m->config().vocab_size,
                                  out.logits.data() + out.logits.numel());
    EXPECT_FALSE(tail == want);
  }
}

TEST(V4SequenceState, MisuseIsBadInput) {
  auto m = load({}, Isa::reference, /*mtp_layer=*/false);
  ASSERT_TRUE(m);
  const auto ids = test_ids(40);
  SequenceState seq;
  seq.block_table = {0, 1, 2};
  seq.state_slot = 0;
  run_chunk(*m, seq, ids, 0, 32);
  Result<std::vector<std::byte>> state = m->export_sequence_state(seq);
  ASSERT_TRUE(state.ok());

  SequenceState other = seq;
  other.state_slot = 1;
  other.n_tokens = 16;  // not the exported position
  EXPECT_EQ(m->import_sequence_state(other, *state).code(), ErrorCode::model_bad_input);
  other.n_tokens = 32;
  std::vector<std::byte> cut(state->begin(), state->end() - 1);
  EXPECT_EQ(m->import_sequence_state(other, cut).code(), ErrorCode::model_bad_input);
  std::vector<std::byte> longer = *state;
  longer.push_back(std::byte{0});
  EXPECT_EQ(m->import_sequence_state(other, longer).code(), ErrorCode::model_bad_input);
  other.state_slot = 1 << 20;
  EXPECT_EQ(m->import_sequence_state(other, *state).code(), ErrorCode::model_bad_input);
  SequenceState stale = seq;
  stale.n_tokens = 20;  // the slot holds 32
  EXPECT_EQ(m->export_sequence_state(stale).status().code(), ErrorCode::model_bad_input);
}

}  // namespace
}  // namespace ds
