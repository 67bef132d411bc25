// The figures of a serving benchmark run, with vllm bench serve's names and definitions:
//   TTFT  time to first token (first text chunk)          TPOT  (E2E - TTFT) / (output tokens - 1)
//   ITL   gaps between text chunks after the first        E2EL  send to end of stream
// each as mean / median / std / p90 / p99 in ms (percentiles with linear interpolation, numpy's
// default); request, output-token and total-token throughput over the run's duration; goodput =
// requests per second that met every SLO given (DistServe's definition).
#pragma once

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_request.h"

namespace ds::bench {

struct GoodputSlo {
  std::optional<double> ttft_ms;
  std::optional<double> tpot_ms;
  std::optional<double> e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

// "ttft:MS" / "tpot:MS" / "e2el:MS" items (vllm's --goodput syntax); invalid_argument otherwise.
Result<GoodputSlo> parse_goodput(const std::vector<std::string>& items);

// Percentile `p` in [0, 100] of `values` with linear interpolation between order statistics;
// 0 for an empty list.
double percentile(std::vector<double> values, double p);

// The summary: completed/failed counts, token totals, throughputs, and the latency statistics of
// the successful requests. `duration_s` is the wall time from the first send to the last answer.
nlohmann::json summarize(const std::vector<RequestRecord>& records, double duration_s, const GoodputSlo& slo);

}  // namespace ds::bench
