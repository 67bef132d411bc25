// DeepSeek-V4's KV block export/import: the paged compressed entries and indexer keys of a cached
// prefix, copied into other blocks, give a replayed continuation bit-identical to replaying on
// the original blocks (the window state is rebuilt by SWA bounded replay, not exported).
#include <gtest/gtest.h>

#include <vector>

#include "model/deepseek_v4.h"
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

}  // namespace
}  // namespace ds
