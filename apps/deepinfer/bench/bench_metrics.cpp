#include "bench/bench_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ds::bench {

using json = nlohmann::json;

Result<GoodputSlo> parse_goodput(const std::vector<std::string>& items) {
  GoodputSlo slo;
  for (const std::string& item : items) {
    const size_t colon = item.find(':');
    const std::string key = item.substr(0, colon);
    double ms = -1;
    if (colon != std::string::npos) {
      try {
        size_t used = 0;
        ms = std::stod(item.substr(colon + 1), &used);
        if (used != item.size() - colon - 1) ms = -1;
      } catch (const std::exception&) {
        ms = -1;
      }
    }
    if (ms <= 0)
      return Status(ErrorCode::invalid_argument, "--goodput '" + item + "': expected NAME:MS with MS > 0");
    if (key == "ttft") {
      slo.ttft_ms = ms;
    } else if (key == "tpot") {
      slo.tpot_ms = ms;
    } else if (key == "e2el") {
      slo.e2el_ms = ms;
    } else {
      return Status(ErrorCode::invalid_argument, "--goodput '" + item + "': NAME must be ttft, tpot or e2el");
    }
  }
  return slo;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

namespace {

// mean/median/std/p90/p99 of `values_s` (seconds) as "<stat>_<name>_ms" fields of `out`.
void add_stats(json& out, const std::string& name, const std::vector<double>& values_s) {
  std::vector<double> ms;
  ms.reserve(values_s.size());
  for (const double v : values_s) ms.push_back(v * 1000.0);
  const double n = static_cast<double>(ms.size());
  const double mean = ms.empty() ? 0 : std::accumulate(ms.begin(), ms.end(), 0.0) / n;
  double var = 0;
  for (const double v : ms) var += (v - mean) * (v - mean);
  out["mean_" + name + "_ms"] = mean;
  out["median_" + name + "_ms"] = percentile(ms, 50);
  out["std_" + name + "_ms"] = ms.empty() ? 0 : std::sqrt(var / n);
  out["p90_" + name + "_ms"] = percentile(ms, 90);
  out["p99_" + name + "_ms"] = percentile(ms, 99);
}

double tpot_s(const RequestRecord& r) {
  return r.output_tokens > 1 ? (r.e2e_s - r.ttft_s) / static_cast<double>(r.output_tokens - 1) : 0.0;
}

bool meets(const RequestRecord& r, const GoodputSlo& slo) {
  if (slo.ttft_ms && r.ttft_s * 1000 > *slo.ttft_ms) return false;
  if (slo.tpot_ms && tpot_s(r) * 1000 > *slo.tpot_ms) return false;
  if (slo.e2el_ms && r.e2e_s * 1000 > *slo.e2el_ms) return false;
  return true;
}

}  // namespace

json summarize(const std::vector<RequestRecord>& records, double duration_s, const GoodputSlo& slo) {
  std::vector<double> ttft, tpot, itl, e2el;
  int64_t completed = 0, input_tokens = 0, output_tokens = 0, good = 0;
  bool usage_everywhere = true;
  for (const RequestRecord& r : records) {
    if (!r.ok) continue;
    ++completed;
    input_tokens += r.prompt_tokens;
    output_tokens += r.output_tokens;
    usage_everywhere = usage_everywhere && r.usage_from_server;
    ttft.push_back(r.ttft_s);
    if (r.output_tokens > 1) tpot.push_back(tpot_s(r));
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    e2el.push_back(r.e2e_s);
    if (meets(r, slo)) ++good;
  }
  const double d = duration_s > 0 ? duration_s : 1e-9;
  json out = {{"duration", duration_s},
              {"num_prompts", records.size()},
              {"completed", completed},
              {"failed", static_cast<int64_t>(records.size()) - completed},
              {"total_input_tokens", input_tokens},
              {"total_output_tokens", output_tokens},
              {"token_counts_from_usage", completed > 0 && usage_everywhere},
              {"request_throughput", static_cast<double>(completed) / d},
              {"input_throughput", static_cast<double>(input_tokens) / d},
              {"output_throughput", static_cast<double>(output_tokens) / d},
              {"total_token_throughput", static_cast<double>(input_tokens + output_tokens) / d}};
  out["request_goodput"] = slo.any() ? json(static_cast<double>(good) / d) : json(nullptr);
  add_stats(out, "ttft", ttft);
  add_stats(out, "tpot", tpot);
  add_stats(out, "itl", itl);
  add_stats(out, "e2el", e2el);
  return out;
}

}  // namespace ds::bench
