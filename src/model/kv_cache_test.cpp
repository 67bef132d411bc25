#include "model/kv_cache.h"

#include <gtest/gtest.h>

namespace ds {
namespace {

TEST(LatentCache, AppendKeepsRowsAcrossGrowth) {
  LatentCache c(3);
  for (int i = 0; i < 100; ++i) {
    float* r = c.append_rows(1);
    for (int j = 0; j < 3; ++j) r[j] = static_cast<float>(i * 10 + j);
  }
  ASSERT_EQ(c.n_rows(), 100);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(c.row(i)[2], static_cast<float>(i * 10 + 2));
  c.truncate(40);
  EXPECT_EQ(c.n_rows(), 40);
  float* r = c.append_rows(2);
  EXPECT_EQ(r, c.data() + 40 * 3);
  EXPECT_EQ(c.row(39)[0], 390.0f);
}

TEST(SequenceState, RoomAndTruncate) {
  SequenceState s(2, 4, true, 10);
  EXPECT_TRUE(s.check_room(10, 0).ok());
  const Status st = s.check_room(4, 7);
  EXPECT_EQ(st.code(), ErrorCode::model_bad_input);
  EXPECT_NE(st.message().find("max_seq_len 10"), std::string::npos);
  for (int l = 0; l < 2; ++l) s.layer(l).append_rows(5);
  s.advance(5);
  s.mtp_layer().append_rows(4);
  s.advance_mtp(4);
  s.truncate(3);
  EXPECT_EQ(s.n_tokens(), 3);
  EXPECT_EQ(s.n_mtp_tokens(), 3);
  EXPECT_EQ(s.layer(1).n_rows(), 3);
  EXPECT_EQ(s.mtp_layer().n_rows(), 3);
}

}  // namespace
}  // namespace ds
