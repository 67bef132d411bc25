// DeepSeek-V3's KV block export/import (model_runner.h, for the KV tiers): a prefix whose blocks
// are exported and imported into other blocks continues bit-identically to the original, and bad
// ids or buffer sizes are refused.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "model/deepseek_v3.h"
#include "model/kv_layer_done_check.h"
#include "model/model_test_support.h"

namespace ds {
namespace {

using namespace model_test;  // NOLINT(google-build-using-namespace): the shared test helpers

std::vector<float> logits_of(const LogitsOutput& out) {
  return std::vector<float>(out.logits.data(), out.logits.data() + out.logits.numel());
}

TEST(KvBlockExport, ImportedBlocksContinueBitIdentically) {
  auto m = load(false);
  ASSERT_TRUE(m);
  const int64_t block_bytes = m->kv_block_bytes();
  ASSERT_GT(block_bytes, 0);
  EXPECT_FALSE(m->kv_layout_tag().empty());
  const SeqRun want = run(*m, kIds, {12});  // blocks 0..2 of the cache

  // Blocks 0 and 1 (positions [0, 8)) copied to blocks 40 and 41 through a byte buffer.
  std::vector<std::byte> bytes(static_cast<size_t>(block_bytes));
  for (int32_t b = 0; b < 2; ++b) {
    ASSERT_TRUE(m->export_kv_block(b, bytes).ok());
    ASSERT_TRUE(m->import_kv_block(40 + b, bytes).ok());
    std::vector<std::byte> again(bytes.size());
    ASSERT_TRUE(m->export_kv_block(40 + b, again).ok());
    EXPECT_TRUE(again == bytes);
  }
  SequenceState restored{{40, 41, 50}, 8, 8};
  LogitsOutput out;
  ForwardRequest rest{&restored, {kIds.data() + 8, kIds.size() - 8}, true};
  ASSERT_TRUE(m->forward({&rest, 1}, out).ok());
  const int64_t V = m->config().vocab_size;
  EXPECT_EQ(logits_of(out), std::vector<float>(want.logits.begin() + 8 * V, want.logits.end()));

  // Without the import, block 60 holds something else: the check can fail.
  std::vector<std::byte> other(bytes.size());
  ASSERT_TRUE(m->export_kv_block(60, other).ok());
  ASSERT_TRUE(m->import_kv_block(60, std::vector<std::byte>(bytes.size(), std::byte{0})).ok());
  SequenceState zeros{{60, 41, 51}, 8, 8};
  ASSERT_TRUE(m->forward({std::array{ForwardRequest{&zeros, {kIds.data() + 8, 4}, true}}}, out).ok());
  EXPECT_NE(logits_of(out), std::vector<float>(want.logits.begin() + 8 * V, want.logits.end()));

  EXPECT_EQ(m->export_kv_block(-1, bytes).code(), ErrorCode::model_bad_input);
  EXPECT_EQ(m->export_kv_block(m->kv_cache_config().n_blocks, bytes).code(), ErrorCode::model_bad_input);
  std::vector<std::byte> short_buffer(bytes.size() - 1);
  EXPECT_EQ(m->import_kv_block(1, short_buffer).code(), ErrorCode::model_bad_input);
}

// The page arrays are the pool itself, in the export order: a block written through them (P/D's
// direct puts) is what import_kv_block would have written.
TEST(KvBlockExport, PageArraysAreTheExportedBytesInPlace) {
  auto m = load(false);
  ASSERT_TRUE(m);
  (void)run(*m, kIds, {12});
  const std::vector<KvPageArray> arrays = m->kv_page_arrays();
  ASSERT_GE(arrays.size(), static_cast<size_t>(m->config().num_hidden_layers));  // (+ the MTP layer)
  int64_t sum = 0;
  for (const KvPageArray& a : arrays) sum += a.block_bytes;
  ASSERT_EQ(sum, m->kv_block_bytes());
  std::vector<std::byte> bytes(static_cast<size_t>(sum));
  for (int32_t b : {0, 1, 2}) {
    ASSERT_TRUE(m->export_kv_block(b, bytes).ok());
    size_t at = 0;
    for (const KvPageArray& a : arrays) {
      EXPECT_EQ(
          std::memcmp(a.base + b * a.block_bytes, bytes.data() + at, static_cast<size_t>(a.block_bytes)), 0)
          << "block " << b;
      at += static_cast<size_t>(a.block_bytes);
    }
  }
  // Writing block 0's pages into block 30 through the arrays = importing them there.
  ASSERT_TRUE(m->export_kv_block(0, bytes).ok());
  for (const KvPageArray& a : arrays)
    std::memcpy(a.base + 30 * a.block_bytes, a.base, static_cast<size_t>(a.block_bytes));
  std::vector<std::byte> got(bytes.size());
  ASSERT_TRUE(m->export_kv_block(30, got).ok());
  EXPECT_TRUE(got == bytes);
}

// Layer by layer (P/D): when layer l ends, its pages of the blocks the forward completes are final
// and no later layer's page has been written yet.
TEST(KvBlockExport, EachLayersPagesAreFinalWhenItsLayerEnds) {
  auto m = load(false);
  ASSERT_TRUE(m);
  SequenceState seq = blocks_from(20);
  // 10 tokens in 4-token blocks: blocks 20 and 21 complete, 22 holds two rows.
  kv_layer_check::expect_pages_final_as_each_layer_ends(*m, seq, std::span(kIds).first(10), {20, 21});
}

}  // namespace
}  // namespace ds
