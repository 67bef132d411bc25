// deepinfer bench serve: a serving benchmark against any OpenAI-compatible server (ours, vLLM,
// llama.cpp), with vllm bench serve's flags, metrics and result-file names (docs/tools.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_dataset.h"
#include "bench/bench_load.h"
#include "bench/bench_metrics.h"
#include "client/model_list.h"
#include "command_support.h"
#include "commands.h"
#include "progress_bar.h"

namespace ds::cli {

namespace {

using json = nlohmann::json;

struct BenchServeOptions {
  std::string base_url = "http://127.0.0.1:8000";
  bench::DatasetOptions dataset;
  std::string request_rate = "inf";
  double burstiness = 1.0;
  int max_concurrency = 0;
  bench::RequestSpec spec;
  std::vector<std::string> goodput;
  std::string result_file;
  std::string label;
  bool skip_test_request = false;
};

Result<double> parse_rate(const std::string& s) {
  if (s == "inf") return std::numeric_limits<double>::infinity();
  try {
    size_t used = 0;
    const double r = std::stod(s, &used);
    if (used == s.size() && r > 0 && std::isfinite(r)) return r;
  } catch (const std::exception&) {
  }
  return Status(ErrorCode::invalid_argument, "--request-rate must be a number > 0 or inf, not '" + s + "'");
}

void print_summary(const json& r) {
  auto line = [](const char* name, const json& v) {
    if (v.is_number_float()) {
      std::printf("%-40s %12.2f\n", name, v.get<double>());
    } else {
      std::printf("%-40s %12s\n", name, v.dump().c_str());
    }
  };
  std::printf("============ Serving Benchmark Result ============\n");
  line("Successful requests:", r["completed"]);
  line("Failed requests:", r["failed"]);
  line("Benchmark duration (s):", r["duration"]);
  line("Total input tokens:", r["total_input_tokens"]);
  line("Total generated tokens:", r["total_output_tokens"]);
  line("Request throughput (req/s):", r["request_throughput"]);
  if (!r["request_goodput"].is_null()) line("Request goodput (req/s):", r["request_goodput"]);
  line("Output token throughput (tok/s):", r["output_throughput"]);
  line("Total token throughput (tok/s):", r["total_token_throughput"]);
  for (const char* m : {"ttft", "tpot", "itl", "e2el"}) {
    const std::string k = m;
    std::printf("---------------- %s ----------------\n", k.c_str());
    for (const char* stat : {"mean", "median", "p90", "p99"}) {
      const std::string key = std::string(stat) + "_" + k + "_ms";
      line((std::string(stat) + " " + k + " (ms):").c_str(), r[key]);
    }
  }
  std::printf("==================================================\n");
}

int run_bench_serve(BenchServeOptions o) {
  const std::string cmd = "bench serve";
  Result<client::BaseUrl> base = client::parse_base_url(o.base_url);
  if (!base.ok()) return report_usage_error(cmd, base.status().message());
  Result<double> rate = parse_rate(o.request_rate);
  if (!rate.ok()) return report_usage_error(cmd, rate.status().message());
  if (o.burstiness <= 0) return report_usage_error(cmd, "--burstiness must be > 0");
  if (o.max_concurrency < 0) return report_usage_error(cmd, "--max-concurrency must be >= 0");
  if (o.spec.endpoint != "chat" && o.spec.endpoint != "completions")
    return report_usage_error(cmd, "--endpoint must be chat or completions");
  Result<bench::GoodputSlo> slo = bench::parse_goodput(o.goodput);
  if (!slo.ok()) return report_usage_error(cmd, slo.status().message());
  Result<std::vector<bench::BenchPrompt>> prompts = bench::make_dataset(o.dataset);
  if (!prompts.ok()) return report_usage_error(cmd, prompts.status().message());
  if (o.spec.model.empty()) {
    Result<std::string> model = client::first_model_id(*base, o.spec.api_key);
    if (!model.ok()) return report_error(cmd, model.status());
    o.spec.model = *model;
  }
  if (!o.skip_test_request) {
    // One request first, so a wrong URL, key or model fails in a second with the server's answer.
    bench::BenchPrompt probe = prompts->front();
    probe.max_tokens = std::min<int64_t>(probe.max_tokens, 4);
    const bench::RequestRecord rec =
        bench::run_request(*base, o.spec, probe, std::chrono::steady_clock::now());
    if (!rec.ok) return report_error(cmd, Status(ErrorCode::io_error, "test request failed: " + rec.error));
  }

  const bench::LoadOptions load{.request_rate = *rate,
                                .burstiness = o.burstiness,
                                .max_concurrency = o.max_concurrency,
                                .seed = o.dataset.seed};
  ProgressBar bar("bench serve", static_cast<int64_t>(prompts->size()));
  const bench::LoadRun run = bench::run_load(
      *base, o.spec, *prompts, load,
      [&](const bench::RequestRecord& r) { bar.advance(1, r.ok ? std::string() : "(failures)"); });

  json result = bench::summarize(run.records, run.duration_s, *slo);
  std::vector<std::string> errors;
  json ttfts = json::array(), e2els = json::array(), input_lens = json::array(), output_lens = json::array();
  for (const bench::RequestRecord& r : run.records) {
    if (!r.ok) {
      if (errors.size() < 10) errors.push_back(r.error);
      continue;
    }
    ttfts.push_back(r.ttft_s);
    e2els.push_back(r.e2e_s);
    input_lens.push_back(r.prompt_tokens);
    output_lens.push_back(r.output_tokens);
  }
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof(date), "%Y%m%d-%H%M%S", std::gmtime(&now));
  result["date"] = date;
  result["backend"] = o.spec.endpoint == "chat" ? "openai-chat" : "openai";
  result["base_url"] = o.base_url;
  result["model_id"] = o.spec.model;
  result["label"] = o.label.empty() ? o.spec.model : o.label;
  result["dataset"] = o.dataset.kind;
  result["random_input_len"] = o.dataset.random_input_len;
  result["random_output_len"] = o.dataset.random_output_len;
  result["shared_prefix_len"] =
      o.dataset.kind == "shared-prefix" ? json(o.dataset.shared_prefix_len) : json(nullptr);
  result["seed"] = o.dataset.seed;
  result["request_rate"] = o.request_rate == "inf" ? json("inf") : json(*rate);
  result["burstiness"] = o.burstiness;
  result["max_concurrency"] = o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr);
  result["ignore_eos"] = o.spec.ignore_eos;
  result["goodput_slo_ms"] = {{"ttft", slo->ttft_ms ? json(*slo->ttft_ms) : json(nullptr)},
                              {"tpot", slo->tpot_ms ? json(*slo->tpot_ms) : json(nullptr)},
                              {"e2el", slo->e2el_ms ? json(*slo->e2el_ms) : json(nullptr)}};
  result["errors"] = errors;
  result["ttfts"] = ttfts;
  result["e2els"] = e2els;
  result["input_lens"] = input_lens;
  result["output_lens"] = output_lens;
  print_summary(result);
  for (const std::string& e : errors)
    std::fprintf(stderr, "deepinfer bench serve: failed request: %s\n", e.c_str());
  if (!o.result_file.empty()) {
    std::ofstream out(o.result_file);
    out << result.dump(2) << "\n";
    if (!out) return report_error(cmd, Status(ErrorCode::io_error, "cannot write " + o.result_file));
  }
  return result["completed"].get<int64_t>() > 0 ? 0 : 1;
}

}  // namespace

void add_bench_serve_command(CLI::App& bench, CommandContext& ctx) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* sub =
      bench.add_subcommand("serve", "Benchmark an OpenAI-compatible server (vllm bench serve's metrics)");
  sub->add_option("--base-url", o->base_url, "Server URL, without /v1")->capture_default_str();
  sub->add_option("--endpoint", o->spec.endpoint,
                  "chat (/v1/chat/completions) or completions (/v1/completions)")
      ->capture_default_str();
  sub->add_option("--model", o->spec.model, "Model name sent (default: the first of /v1/models)");
  sub->add_option("--api-key", o->spec.api_key, "Bearer token");
  sub->add_option("--dataset", o->dataset.kind, "random | shared-prefix | jsonl")->capture_default_str();
  sub->add_option("--dataset-path", o->dataset.path,
                  "JSONL file for --dataset jsonl ({\"prompt\": ...} per line)");
  sub->add_option("--num-prompts", o->dataset.num_prompts, "Requests to send")->capture_default_str();
  sub->add_option("--random-input-len", o->dataset.random_input_len, "Prompt words (about tokens)")
      ->capture_default_str();
  sub->add_option("--random-output-len", o->dataset.random_output_len, "max_tokens per request")
      ->capture_default_str();
  sub->add_option("--shared-prefix-len", o->dataset.shared_prefix_len, "Shared prefix words (shared-prefix)")
      ->capture_default_str();
  sub->add_option("--seed", o->dataset.seed, "Seed of the prompts and the arrivals")->capture_default_str();
  sub->add_option("--request-rate", o->request_rate, "Requests per second (Poisson), or inf")
      ->capture_default_str();
  sub->add_option("--burstiness", o->burstiness, "Gamma shape of the arrivals (1 = Poisson)")
      ->capture_default_str();
  sub->add_option("--max-concurrency", o->max_concurrency, "Requests in flight at most (0 = no limit)")
      ->capture_default_str();
  sub->add_option("--temperature", o->spec.temperature, "Sampling temperature sent")->capture_default_str();
  sub->add_flag("--ignore-eos", o->spec.ignore_eos, "Send ignore_eos (vLLM; ignored by servers without it)");
  sub->add_option("--goodput", o->goodput, "SLOs as ttft:MS tpot:MS e2el:MS");
  sub->add_option("--result-file", o->result_file, "Write the result JSON here");
  sub->add_option("--label", o->label, "Series name in plots (default: the model)");
  sub->add_flag("--skip-test-request", o->skip_test_request, "Do not send the initial probe request");
  sub->callback([o, &ctx] { ctx.exit_code = run_bench_serve(*o); });
}

}  // namespace ds::cli
