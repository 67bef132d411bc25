// The V4 sequence-state codec: lossless round trips whatever the rows hold (bf16-exact values, f32
// values, bf16 and f32 columns in one row, rows at their initial value, -0.0), trimmed sizes, refusals.
#include "model/v4_state_codec.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

namespace ds {
namespace {

V4SequenceSlot shaped() {
  V4SequenceSlot slot;
  slot.layers.resize(3);
  slot.layers[0].reset(8, 4, 0, false, false, 0);  // window only
  slot.layers[1].reset(8, 4, 4, true, true, 2);    // CSA: overlapping compressor + indexer compressor
  slot.layers[2].reset(8, 4, 8, false, false, 0);  // HCA
  return slot;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void expect_round_trip(const V4SequenceSlot& slot) {
  const std::vector<std::byte> bytes = encode_v4_state(slot);
  EXPECT_LE(static_cast<int64_t>(bytes.size()), max_encoded_v4_state_bytes(shaped()));
  V4SequenceSlot back = shaped();
  ASSERT_TRUE(decode_v4_state(bytes, back).ok());
  EXPECT_EQ(back.n_tokens, slot.n_tokens);
  for (size_t l = 0; l < slot.layers.size(); ++l) {
    const V4LayerState &a = slot.layers[l], &b = back.layers[l];
    EXPECT_TRUE(same_bits(a.ring_kv, b.ring_kv)) << l;
    EXPECT_EQ(a.ring_pos, b.ring_pos) << l;
    EXPECT_TRUE(same_bits(a.comp.kv, b.comp.kv) && same_bits(a.comp.score, b.comp.score)) << l;
    EXPECT_TRUE(same_bits(a.idx_comp.kv, b.idx_comp.kv) && same_bits(a.idx_comp.score, b.idx_comp.score))
        << l;
    EXPECT_EQ(a.n_entries, b.n_entries);
    EXPECT_EQ(a.n_idx_keys, b.n_idx_keys);
  }
  EXPECT_EQ(back.engram_history, slot.engram_history);
  EXPECT_EQ(back.published_index_keys, slot.published_index_keys);
}

TEST(V4StateCodec, RoundTripsBitForBitAndTrimsUnusedRows) {
  const V4SequenceSlot fresh = shaped();
  expect_round_trip(fresh);
  const size_t fresh_bytes = encode_v4_state(fresh).size();

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  V4SequenceSlot slot = shaped();
  slot.n_tokens = 21;
  slot.engram_history = {5, 9};
  slot.published_index_keys = 1;
  // Ring rows 0..4 written with bf16-exact values (layer 0), f32 values (layer 1), one row of -0.0.
  for (size_t l = 0; l < 3; ++l) {
    V4LayerState& st = slot.layers[l];
    for (int r = 0; r < 5; ++r) {
      st.ring_pos[static_cast<size_t>(r)] = 16 + r;
      for (int i = 0; i < 4; ++i) {
        float x = normal(rng);
        if (l == 0 || (l == 2 && i < 2)) {  // keep the top 16 bits only: a bf16 value
          uint32_t b = 0;
          std::memcpy(&b, &x, sizeof b);
          b &= 0xffff0000u;
          std::memcpy(&x, &b, sizeof x);
        }
        st.ring_kv[static_cast<size_t>(r * 4 + i)] = x;
      }
    }
    st.ring_kv[5 * 4] = -0.0f;  // differs from +0.0 in its bits: a live row
  }
  // CSA: the previous group (rows 0..3) complete, the current one half started; HCA: 3 rows.
  for (size_t k = 0; k < 4 * 8; ++k) slot.layers[1].comp.kv[k] = normal(rng);
  for (size_t k = 0; k < 6 * 8; ++k) slot.layers[1].comp.score[k] = normal(rng);
  for (size_t k = 0; k < 4 * 4; ++k) slot.layers[1].idx_comp.kv[k] = normal(rng);
  for (size_t k = 0; k < 3 * 4; ++k) slot.layers[2].comp.score[k] = normal(rng);
  slot.layers[1].n_entries = 4;
  slot.layers[1].n_idx_keys = 4;
  slot.layers[2].n_entries = 2;
  expect_round_trip(slot);
  EXPECT_GT(encode_v4_state(slot).size(), fresh_bytes);
  EXPECT_LT(static_cast<int64_t>(fresh_bytes), max_encoded_v4_state_bytes(fresh) / 2);
}

TEST(V4StateCodec, RefusesOtherShapesAndDamage) {
  V4SequenceSlot slot = shaped();
  slot.layers[1].ring_kv[3] = 1.5f;
  const std::vector<std::byte> bytes = encode_v4_state(slot);
  V4SequenceSlot other = shaped();
  other.layers[2].reset(8, 4, 16, false, false, 0);  // another HCA ratio
  EXPECT_EQ(decode_v4_state(bytes, other).code(), ErrorCode::model_bad_input);
  V4SequenceSlot fewer;
  fewer.layers.resize(2, shaped().layers[0]);
  EXPECT_EQ(decode_v4_state(bytes, fewer).code(), ErrorCode::model_bad_input);
  for (size_t cut = 0; cut < bytes.size(); ++cut) {
    V4SequenceSlot target = shaped();
    EXPECT_FALSE(decode_v4_state(std::span(bytes).first(cut), target).ok()) << cut;
  }
}

}  // namespace
}  // namespace ds
