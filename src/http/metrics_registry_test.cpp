#include "http/metrics_registry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "http/serving_metrics.h"
#include "http/test_prometheus_parser.h"

namespace ds::server {
namespace {

using testing::parse_prometheus_text;

TEST(MetricsRegistry, CountersGaugesRenderAndParse) {
  MetricsRegistry r;
  Counter& c = r.counter("deepinfer:things_total", "Things.");
  Gauge& g = r.gauge("deepinfer:level", "A level.");
  c.inc();
  c.inc(2.5);
  g.set(-3);
  g.add(0.25);
  const auto p = parse_prometheus_text(r.render());
  ASSERT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(p.types.at("deepinfer:things_total"), "counter");
  EXPECT_EQ(p.types.at("deepinfer:level"), "gauge");
  EXPECT_DOUBLE_EQ(p.value("deepinfer:things_total"), 3.5);
  EXPECT_DOUBLE_EQ(p.value("deepinfer:level"), -2.75);
}

TEST(MetricsRegistry, LabelledSeriesAndEscaping) {
  MetricsRegistry r;
  auto& fam = r.counter_family("deepinfer:req_total", "Requests.", {"route", "status"});
  fam.with({"/v1/chat/completions", "200"}).inc(4);
  fam.with({"weird \"quoted\"\\path\nline", "404"}).inc();
  EXPECT_EQ(&fam.with({"/v1/chat/completions", "200"}), &fam.with({"/v1/chat/completions", "200"}));
  const std::string text = r.render();
  EXPECT_NE(text.find(R"(route="weird \"quoted\"\\path\nline")"), std::string::npos) << text;
  const auto p = parse_prometheus_text(text);
  ASSERT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_DOUBLE_EQ(p.value("deepinfer:req_total", {{"route", "/v1/chat/completions"}, {"status", "200"}}), 4);
  EXPECT_DOUBLE_EQ(
      p.value("deepinfer:req_total", {{"route", "weird \"quoted\"\\path\nline"}, {"status", "404"}}), 1);
}

TEST(MetricsRegistry, HistogramBucketsAreCumulativeWithLessOrEqualBounds) {
  MetricsRegistry r;
  Histogram& h = r.histogram("deepinfer:lat_seconds", "Latency.", {0.1, 1.0, 10.0});
  for (double v : {0.05, 0.1, 0.5, 1.0, 3.0, 100.0}) h.observe(v);
  const auto p = parse_prometheus_text(r.render());
  ASSERT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(p.value("deepinfer:lat_seconds_bucket", {{"le", "0.1"}}), 2);  // 0.05 and 0.1 (le is inclusive)
  EXPECT_EQ(p.value("deepinfer:lat_seconds_bucket", {{"le", "1"}}), 4);
  EXPECT_EQ(p.value("deepinfer:lat_seconds_bucket", {{"le", "10"}}), 5);
  EXPECT_EQ(p.value("deepinfer:lat_seconds_bucket", {{"le", "+Inf"}}), 6);
  EXPECT_EQ(p.value("deepinfer:lat_seconds_count"), 6);
  EXPECT_DOUBLE_EQ(p.value("deepinfer:lat_seconds_sum"), 104.65);
}

TEST(MetricsRegistry, ConcurrentUpdatesAreNotLost) {
  MetricsRegistry r;
  Counter& c = r.counter("deepinfer:c_total", "C.");
  auto& fam = r.counter_family("deepinfer:l_total", "L.", {"k"});
  Histogram& h = r.histogram("deepinfer:h", "H.", {1.0});
  constexpr int kThreads = 4, kIters = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        c.inc();
        fam.with({std::to_string(i % 3)}).inc();
        h.observe(t % 2 == 0 ? 0.5 : 2.0);
        if (i % 1000 == 0) (void)r.render();  // scrapes race with updates
      }
    });
  }
  for (auto& t : threads) t.join();
  const auto p = parse_prometheus_text(r.render());
  ASSERT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(p.value("deepinfer:c_total"), kThreads * kIters);
  double labelled = 0;
  for (const char* k : {"0", "1", "2"}) labelled += p.value("deepinfer:l_total", {{"k", k}});
  EXPECT_EQ(labelled, kThreads * kIters);
  EXPECT_EQ(p.value("deepinfer:h_count"), kThreads * kIters);
  EXPECT_EQ(p.value("deepinfer:h_bucket", {{"le", "1"}}), kThreads / 2 * kIters);
}

TEST(MetricsRegistry, CollectorsRunBeforeRender) {
  MetricsRegistry r;
  Gauge& g = r.gauge("deepinfer:pulled", "Pulled at scrape time.");
  int calls = 0;
  r.add_collector([&] { g.set(++calls * 10); });
  EXPECT_EQ(parse_prometheus_text(r.render()).value("deepinfer:pulled"), 10);
  EXPECT_EQ(parse_prometheus_text(r.render()).value("deepinfer:pulled"), 20);
}

TEST(MetricsRegistry, ValueFormatting) {
  EXPECT_EQ(format_metric_value(3), "3");
  EXPECT_EQ(format_metric_value(0.25), "0.25");
  EXPECT_EQ(format_metric_value(INFINITY), "+Inf");
  EXPECT_EQ(format_metric_value(-INFINITY), "-Inf");
  EXPECT_EQ(format_metric_value(NAN), "NaN");
  EXPECT_EQ(std::stod(format_metric_value(1e-7)), 1e-7);
}

TEST(MetricsRegistryDeath, RegistrationMistakesAbort) {
  EXPECT_DEATH(
      {
        MetricsRegistry r;
        r.counter("dup", "a");
        r.counter("dup", "b");
      },
      "registered twice");
  EXPECT_DEATH({ MetricsRegistry().counter("bad name", "x"); }, "invalid Prometheus metric name");
  EXPECT_DEATH({ MetricsRegistry().histogram("h", "x", {1.0, 0.5}); }, "must increase");
}

TEST(ServingMetrics, VllmLikeNamesAreExported) {
  MetricsRegistry r;
  ServingMetrics m(r);
  EngineGaugeSample s;
  s.n_requests_running = 3;
  s.n_requests_waiting = 5;
  s.prefill_tokens_pending = 700;
  s.kv_cache_usage = 0.5;
  s.prompt_tokens = 1000;
  s.generation_tokens = 200;
  s.prefix_cache_query_tokens = 900;
  s.prefix_cache_hit_tokens = 300;
  m.set_engine_sample(s);
  m.record_request_finished("stop");
  m.record_request_finished("stop");
  m.record_request_finished("length");
  m.time_to_first_token_seconds.observe(0.2);
  m.record_http("/v1/chat/completions", "POST", 200, 0.01);
  const auto p = parse_prometheus_text(r.render());
  ASSERT_TRUE(p.errors.empty()) << p.errors.front();
  EXPECT_EQ(p.value("deepinfer:num_requests_running"), 3);
  EXPECT_EQ(p.value("deepinfer:num_requests_waiting"), 5);
  EXPECT_EQ(p.value("deepinfer:num_prefill_tokens_pending"), 700);
  EXPECT_EQ(p.value("deepinfer:kv_cache_usage_perc"), 0.5);
  EXPECT_EQ(p.value("deepinfer:prompt_tokens_total"), 1000);
  EXPECT_EQ(p.value("deepinfer:generation_tokens_total"), 200);
  EXPECT_EQ(p.value("deepinfer:prefix_cache_queries_total"), 900);
  EXPECT_EQ(p.value("deepinfer:prefix_cache_hits_total"), 300);
  EXPECT_EQ(p.value("deepinfer:request_success_total", {{"finished_reason", "stop"}}), 2);
  EXPECT_EQ(p.value("deepinfer:request_success_total", {{"finished_reason", "length"}}), 1);
  EXPECT_EQ(p.value("deepinfer:time_to_first_token_seconds_count"), 1);
  for (const char* h : {"deepinfer:inter_token_latency_seconds", "deepinfer:e2e_request_latency_seconds",
                        "deepinfer:request_queue_time_seconds"}) {
    EXPECT_EQ(p.types.at(h), "histogram") << h;
  }
  EXPECT_EQ(p.value("deepinfer:http_requests_total",
                    {{"route", "/v1/chat/completions"}, {"method", "POST"}, {"status", "200"}}),
            1);
}

}  // namespace
}  // namespace ds::server
