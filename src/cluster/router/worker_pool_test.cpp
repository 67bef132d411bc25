#include "cluster/router/worker_pool.h"

#include <gtest/gtest.h>

namespace ds::cluster {
namespace {

WorkerState prefill_server() { return WorkerState(*parse_worker_url("http://127.0.0.1:9", "--prefill")); }

TEST(PrefillQueueTokens, AnEndedRequestStopsCountingBeforeTheNextReport) {
  WorkerState w = prefill_server();
  w.report_prefill_tokens(100);
  const uint64_t a = w.route_prefill(300);
  const uint64_t b = w.route_prefill(200);
  EXPECT_EQ(w.prefill_queue_tokens(), 600);
  w.end_prefill(300, a);
  EXPECT_EQ(w.prefill_queue_tokens(), 300);
  w.end_prefill(200, b);
  EXPECT_EQ(w.prefill_queue_tokens(), 100);
}

TEST(PrefillQueueTokens, AReportReplacesTheRoutedCountOnce) {
  WorkerState w = prefill_server();
  const uint64_t before = w.route_prefill(300);
  w.report_prefill_tokens(300);  // the server's report covers the request
  EXPECT_EQ(w.prefill_queue_tokens(), 300);
  const uint64_t after = w.route_prefill(50);
  w.end_prefill(300, before);  // already replaced by the report: not taken off again
  EXPECT_EQ(w.prefill_queue_tokens(), 350);
  w.end_prefill(50, after);
  EXPECT_EQ(w.prefill_queue_tokens(), 300);
  w.report_prefill_tokens(0);
  EXPECT_EQ(w.prefill_queue_tokens(), 0);
}

}  // namespace
}  // namespace ds::cluster
