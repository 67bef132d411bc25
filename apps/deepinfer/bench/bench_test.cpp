// bench serve's figures on scripted request records, its arrivals and its datasets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "bench/bench_dataset.h"
#include "bench/bench_load.h"
#include "bench/bench_metrics.h"

namespace ds::bench {
namespace {

TEST(Percentile, LinearInterpolationLikeNumpy) {
  // numpy.percentile([1,2,3,4], [50, 90, 99]) = 2.5, 3.7, 3.97
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_NEAR(percentile({4, 1, 3, 2}, 90), 3.7, 1e-12);
  EXPECT_NEAR(percentile({4, 1, 3, 2}, 99), 3.97, 1e-12);
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 0), 1);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3}, 100), 3);
}

RequestRecord record(double ttft_s, double e2e_s, int64_t in, int64_t out) {
  RequestRecord r;
  r.ok = true;
  r.ttft_s = ttft_s;
  r.e2e_s = e2e_s;
  r.prompt_tokens = in;
  r.output_tokens = out;
  r.usage_from_server = true;
  for (int64_t i = 1; i < out; ++i) r.itl_s.push_back((e2e_s - ttft_s) / static_cast<double>(out - 1));
  return r;
}

TEST(Summarize, FiguresFollowTheirDefinitions) {
  std::vector<RequestRecord> recs = {record(0.1, 1.1, 10, 11), record(0.3, 2.3, 20, 21)};
  RequestRecord failed;
  failed.error = "HTTP 500";
  recs.push_back(failed);
  const auto s = summarize(recs, 4.0, {});
  EXPECT_EQ(s["completed"], 2);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_EQ(s["total_input_tokens"], 30);
  EXPECT_EQ(s["total_output_tokens"], 32);
  EXPECT_DOUBLE_EQ(s["request_throughput"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["output_throughput"].get<double>(), 8.0);
  EXPECT_DOUBLE_EQ(s["total_token_throughput"].get<double>(), 15.5);
  EXPECT_NEAR(s["mean_ttft_ms"].get<double>(), 200, 1e-9);
  EXPECT_NEAR(s["std_ttft_ms"].get<double>(), 100, 1e-9);
  EXPECT_NEAR(s["mean_tpot_ms"].get<double>(), 100, 1e-9);  // (1.0 s / 10) and (2.0 s / 20)
  EXPECT_NEAR(s["median_itl_ms"].get<double>(), 100, 1e-9);
  EXPECT_NEAR(s["p99_e2el_ms"].get<double>(), 1100 + 0.99 * 1200, 1e-9);
  EXPECT_TRUE(s["request_goodput"].is_null());
  EXPECT_TRUE(s["token_counts_from_usage"].get<bool>());
}

TEST(Summarize, GoodputCountsRequestsMeetingEverySlo) {
  const std::vector<RequestRecord> recs = {record(0.1, 1.1, 1, 11), record(0.3, 2.3, 1, 21),
                                           record(0.05, 5.05, 1, 11)};
  Result<GoodputSlo> slo = parse_goodput({"ttft:200", "tpot:150"});
  ASSERT_TRUE(slo.ok());
  // first: ttft 100 ms, tpot 100 ms -> good; second: ttft 300 -> bad; third: tpot 500 -> bad
  EXPECT_DOUBLE_EQ(summarize(recs, 2.0, *slo)["request_goodput"].get<double>(), 0.5);
  slo = parse_goodput({"e2el:3000"});
  ASSERT_TRUE(slo.ok());
  EXPECT_DOUBLE_EQ(summarize(recs, 2.0, *slo)["request_goodput"].get<double>(), 1.0);
}

TEST(ParseGoodput, RefusesBadItems) {
  for (const char* bad : {"ttft", "ttft:", "ttft:-1", "ttft:1x", "foo:10"})
    EXPECT_FALSE(parse_goodput({bad}).ok()) << bad;
}

TEST(ArrivalTimes, InfiniteRateSendsAllAtOnce) {
  for (const double t : arrival_times(5, {})) EXPECT_EQ(t, 0.0);
}

TEST(ArrivalTimes, PoissonMeanGapAndSeeded) {
  const LoadOptions load{.request_rate = 50.0, .burstiness = 1.0, .max_concurrency = 0, .seed = 7};
  const std::vector<double> a = arrival_times(4000, load);
  EXPECT_EQ(a, arrival_times(4000, load));
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  // 3999 exponential gaps of mean 20 ms: the mean is within a few percent (sd of the mean ~0.3 ms).
  EXPECT_NEAR(a.back() / 3999.0, 0.02, 0.002);
  const LoadOptions other{.request_rate = 50.0, .burstiness = 1.0, .max_concurrency = 0, .seed = 8};
  EXPECT_NE(a, arrival_times(4000, other));
}

TEST(Dataset, RandomIsSeededWithTheAskedLength) {
  DatasetOptions o;
  o.num_prompts = 3;
  o.random_input_len = 20;
  o.random_output_len = 9;
  o.seed = 1;
  Result<std::vector<BenchPrompt>> a = make_dataset(o);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 3u);
  EXPECT_EQ(std::count((*a)[0].text.begin(), (*a)[0].text.end(), ' '), 19);
  EXPECT_EQ((*a)[0].max_tokens, 9);
  EXPECT_NE((*a)[0].text, (*a)[1].text);
  EXPECT_EQ(make_dataset(o)->at(2).text, (*a)[2].text);
}

TEST(Dataset, SharedPrefixSharesItsPrefix) {
  DatasetOptions o;
  o.kind = "shared-prefix";
  o.num_prompts = 2;
  o.random_input_len = 5;
  o.shared_prefix_len = 30;
  Result<std::vector<BenchPrompt>> a = make_dataset(o);
  ASSERT_TRUE(a.ok());
  const std::string& p0 = (*a)[0].text;
  const std::string& p1 = (*a)[1].text;
  size_t common = 0;
  while (common < p0.size() && p0[common] == p1[common]) ++common;
  EXPECT_GE(std::count(p0.begin(), p0.begin() + static_cast<std::ptrdiff_t>(common), ' '), 30);
}

TEST(Dataset, JsonlNamesTheBadLine) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "bench_dataset_test.jsonl";
  {
    std::ofstream f(path);
    f << "{\"prompt\": \"a\", \"max_tokens\": 3}\n\n{\"prompt\": \"b\"}\n";
  }
  DatasetOptions o;
  o.kind = "jsonl";
  o.path = path.string();
  o.num_prompts = 3;
  o.random_output_len = 7;
  Result<std::vector<BenchPrompt>> a = make_dataset(o);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)[0].max_tokens, 3);
  EXPECT_EQ((*a)[1].text, "b");
  EXPECT_EQ((*a)[1].max_tokens, 7);
  EXPECT_EQ((*a)[2].text, "a");  // repeated in order
  {
    std::ofstream f(path);
    f << "{\"prompt\": \"a\"}\n{\"text\": 1}\n";
  }
  a = make_dataset(o);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find(":2: field 'prompt'"), std::string::npos) << a.status().message();
  std::filesystem::remove(path);
  o.kind = "sharegpt";
  EXPECT_FALSE(make_dataset(o).ok());
}

}  // namespace
}  // namespace ds::bench
