#include "engine/waiting_queue.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/tenant_share.h"

namespace ds {
namespace {

// Pops everything in policy order.
std::vector<SeqId> drain(WaitingQueue& queue, const TenantShare& share) {
  std::vector<SeqId> order;
  while (const std::optional<SeqId> next = queue.front(share)) {
    order.push_back(*next);
    EXPECT_TRUE(queue.erase(*next));
    EXPECT_TRUE(queue.check_integrity().ok());
  }
  return order;
}

TEST(WaitingQueue, PriorityThenResumedThenFifo) {
  TenantShare share;
  share.activate("");
  WaitingQueue queue;
  queue.push(1, 0, "", 1, false);
  queue.push(2, 0, "", 2, false);
  queue.push(3, 2, "", 3, false);
  queue.push(4, 0, "", 9, true);  // preempted: first within priority 0 despite a later order key
  queue.push(5, 2, "", 5, false);
  queue.push(6, -1, "", 0, false);
  EXPECT_EQ(queue.size(), 6);
  EXPECT_TRUE(queue.check_integrity().ok());
  EXPECT_EQ(drain(queue, share), (std::vector<SeqId>{3, 5, 4, 1, 2, 6}));
  EXPECT_TRUE(queue.empty());
}

TEST(WaitingQueue, TenantWithFewestServedTokensGoesFirst) {
  TenantShare share;
  WaitingQueue queue;
  for (const char* tenant : {"a", "a", "a", "b"}) share.activate(tenant);
  queue.push(1, 0, "a", 1, false);
  queue.push(2, 0, "a", 2, false);
  queue.push(3, 0, "a", 3, false);
  queue.push(4, 0, "b", 4, false);
  // Equal counters: the earliest head (a's seq 1) first.
  EXPECT_EQ(queue.front(share), SeqId{1});
  share.charge("a", 10);
  EXPECT_EQ(queue.front(share), SeqId{4});
  share.charge("b", 20);
  EXPECT_EQ(queue.front(share), SeqId{1});
  EXPECT_TRUE(queue.erase(1));
  EXPECT_EQ(queue.front(share), SeqId{2});
}

TEST(WaitingQueue, EraseFromAnywhere) {
  TenantShare share;
  share.activate("a");
  WaitingQueue queue;
  for (SeqId id = 1; id <= 5; ++id) queue.push(id, static_cast<int32_t>(id % 2), "a", id, id == 3);
  EXPECT_TRUE(queue.erase(3));
  EXPECT_FALSE(queue.erase(3));
  EXPECT_FALSE(queue.contains(3));
  EXPECT_TRUE(queue.erase(2));
  EXPECT_TRUE(queue.check_integrity().ok());
  EXPECT_EQ(drain(queue, share), (std::vector<SeqId>{1, 5, 4}));
}

TEST(TenantShare, NewTenantStartsAtTheLowestActiveCounterAndInactiveOnesAreForgotten) {
  TenantShare share;
  share.activate("a");
  share.charge("a", 100);
  share.activate("b");
  EXPECT_EQ(share.served_tokens("b"), 100);  // no credit for having been idle
  share.charge("b", 50);
  share.activate("c");
  EXPECT_EQ(share.served_tokens("c"), 100);
  EXPECT_EQ(share.n_active_tenants(), 3);
  share.deactivate("a");
  EXPECT_EQ(share.n_active_tenants(), 2);
  EXPECT_EQ(share.served_tokens("a"), 0);
  share.activate("a");
  EXPECT_EQ(share.served_tokens("a"), 100);  // min of b (150) and c (100)
  EXPECT_TRUE(share.check_integrity().ok());
}

}  // namespace
}  // namespace ds
