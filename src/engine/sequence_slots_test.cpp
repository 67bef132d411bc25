#include "engine/sequence_slots.h"

#include <gtest/gtest.h>

#include <set>

namespace ds {
namespace {

TEST(SequenceSlots, EachRunningSequenceKeepsOneDistinctSlot) {
  SequenceSlots slots(3);
  Result<int32_t> a = slots.slot_for(10), b = slots.slot_for(11), c = slots.slot_for(12);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(std::set<int32_t>({*a, *b, *c}), std::set<int32_t>({0, 1, 2}));
  EXPECT_EQ(*slots.slot_for(11), *b) << "a sequence keeps its slot across steps";
  Result<int32_t> d = slots.slot_for(13);
  EXPECT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), ErrorCode::internal);
}

TEST(SequenceSlots, ReclaimFreesOnlyStoppedSequences) {
  SequenceSlots slots(2);
  const int32_t a = *slots.slot_for(1);
  const int32_t b = *slots.slot_for(2);
  slots.reclaim([](SeqId s) { return s == 2; });
  EXPECT_EQ(slots.n_used(), 1);
  EXPECT_EQ(*slots.slot_for(2), b);
  EXPECT_EQ(*slots.slot_for(3), a) << "the freed slot goes to the next sequence";
  EXPECT_FALSE(slots.slot_for(4).ok());
}

}  // namespace
}  // namespace ds
