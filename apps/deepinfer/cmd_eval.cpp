// deepinfer eval: score a model behind any OpenAI-compatible server on a JSONL task file (exact
// match with answer extraction, multiple choice, JSON validity; pass@k over n samples), with
// Wilson intervals and a per-sample JSONL log (docs/tools.md).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "client/model_list.h"
#include "command_support.h"
#include "commands.h"
#include "eval/eval_client.h"
#include "eval/eval_report.h"
#include "eval/eval_task.h"
#include "progress_bar.h"

namespace ds::cli {

namespace {

using json = nlohmann::json;

struct EvalOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string task_file;
  eval::EvalRequestOptions request;
  std::string thinking = "default";  // default | on | off
  int n_samples = 1;
  std::vector<int> ks = {1};
  int concurrency = 8;
  int limit = 0;  // 0 = every item
  std::string log_file;
  std::string result_file;
};

// Runs every (item, sample) pair on `concurrency` client threads; results[i][s].
std::vector<std::vector<eval::SampleResult>> run_all(const client::BaseUrl& base, const EvalOptions& o,
                                                     const std::vector<eval::TaskItem>& items) {
  std::vector<std::vector<eval::SampleResult>> results(
      items.size(), std::vector<eval::SampleResult>(static_cast<size_t>(o.n_samples)));
  const int total = static_cast<int>(items.size()) * o.n_samples;
  std::atomic<int> next{0};
  std::atomic<int> correct{0};
  ProgressBar bar("eval", total);
  {
    std::vector<std::jthread> workers;
    for (int t = 0; t < std::min(o.concurrency, total); ++t) {
      workers.emplace_back([&] {
        for (int job = next.fetch_add(1); job < total; job = next.fetch_add(1)) {
          const size_t i = static_cast<size_t>(job / o.n_samples);
          const int s = job % o.n_samples;
          eval::SampleResult r = eval::run_sample(base, o.request, items[i].prompt, s);
          eval::score_sample(items[i], r);
          correct += r.correct ? 1 : 0;
          results[i][static_cast<size_t>(s)] = std::move(r);
          bar.advance(1, "correct " + std::to_string(correct.load()));
        }
      });
    }
  }
  return results;
}

std::string first_error(const std::vector<std::vector<eval::SampleResult>>& results) {
  for (const auto& row : results)
    for (const eval::SampleResult& r : row)
      if (!r.ok) return r.error;
  return {};
}

Status write_log(const std::string& path, const std::vector<eval::TaskItem>& items,
                 const std::vector<std::vector<eval::SampleResult>>& results) {
  std::ofstream out(path);
  for (size_t i = 0; i < items.size(); ++i) {
    for (size_t s = 0; s < results[i].size(); ++s) {
      const eval::SampleResult& r = results[i][s];
      out << json{{"id", items[i].id},
                  {"sample", s},
                  {"type", eval::item_type_name(items[i].type)},
                  {"prompt", items[i].prompt},
                  {"answer", items[i].answer},
                  {"content", r.content},
                  {"reasoning_content", r.reasoning},
                  {"extracted", r.extracted},
                  {"correct", r.correct},
                  {"error", r.ok ? json(nullptr) : json(r.error)},
                  {"completion_tokens", r.completion_tokens},
                  {"latency_s", r.latency_s}}
                 .dump()
          << "\n";
    }
  }
  return out ? ok_status() : Status(ErrorCode::io_error, "cannot write " + path);
}

int run_eval(EvalOptions o) {
  const std::string cmd = "eval";
  Result<client::BaseUrl> base = client::parse_base_url(o.base_url);
  if (!base.ok()) return report_usage_error(cmd, base.status().message());
  if (o.n_samples < 1) return report_usage_error(cmd, "--n must be >= 1");
  if (o.concurrency < 1) return report_usage_error(cmd, "--concurrency must be >= 1");
  if (o.request.timeout_s < 1) return report_usage_error(cmd, "--timeout-s must be >= 1");
  for (const int k : o.ks)
    if (k < 1 || k > o.n_samples) return report_usage_error(cmd, "--k values must be in [1, --n]");
  if (o.thinking == "on") {
    o.request.thinking = true;
  } else if (o.thinking == "off") {
    o.request.thinking = false;
  } else if (o.thinking != "default") {
    return report_usage_error(cmd, "--thinking must be default, on or off");
  }
  Result<std::vector<eval::TaskItem>> items = eval::load_task(o.task_file);
  if (!items.ok()) return report_usage_error(cmd, items.status().message());
  if (o.limit > 0 && static_cast<size_t>(o.limit) < items->size())
    items->resize(static_cast<size_t>(o.limit));
  if (o.request.model.empty()) {
    Result<std::string> model = client::first_model_id(*base, o.request.api_key);
    if (!model.ok()) return report_error(cmd, model.status());
    o.request.model = *model;
  }

  const std::vector<std::vector<eval::SampleResult>> results = run_all(*base, o, *items);
  json summary = eval::summarize_eval(*items, results, o.ks);
  summary["task"] = o.task_file;
  summary["model_id"] = o.request.model;
  summary["base_url"] = o.base_url;
  summary["n"] = o.n_samples;
  summary["temperature"] = o.request.temperature;
  summary["max_tokens"] = o.request.max_tokens;
  summary["thinking"] = o.thinking;
  const json& ci = summary["accuracy_ci95"];
  std::printf("%s: accuracy %.4f (95%% CI %.4f-%.4f) over %zu items x %d samples; %lld failed requests\n",
              o.task_file.c_str(), summary["accuracy"].get<double>(), ci[0].get<double>(),
              ci[1].get<double>(), items->size(), o.n_samples,
              static_cast<long long>(summary["failed_requests"].get<int64_t>()));
  for (const auto& [k, v] : summary["pass_at_k"].items())
    if (!v.is_null()) std::printf("  %s %.4f\n", k.c_str(), v.get<double>());
  if (const std::string e = first_error(results); !e.empty())
    std::fprintf(stderr, "deepinfer eval: first failed request: %s\n", e.c_str());
  if (!o.log_file.empty()) {
    if (Status st = write_log(o.log_file, *items, results); !st.ok()) return report_error(cmd, st);
  }
  if (!o.result_file.empty()) {
    std::ofstream out(o.result_file);
    out << summary.dump(2) << "\n";
    if (!out) return report_error(cmd, Status(ErrorCode::io_error, "cannot write " + o.result_file));
  }
  return summary["failed_requests"].get<int64_t>() == summary["samples"].get<int64_t>() ? 1 : 0;
}

}  // namespace

void add_eval_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* sub =
      app.add_subcommand("eval", "Score a model behind an OpenAI-compatible server on a task file");
  sub->add_option("--base-url", o->base_url, "Server URL, without /v1")->capture_default_str();
  sub->add_option("--task", o->task_file, "JSONL task file (question/answer[/choices/type] per line)")
      ->required();
  sub->add_option("--model", o->request.model, "Model name sent (default: the first of /v1/models)");
  sub->add_option("--api-key", o->request.api_key, "Bearer token");
  sub->add_option("--system", o->request.system_prompt, "System prompt");
  sub->add_option("--max-tokens", o->request.max_tokens, "max_tokens per sample")->capture_default_str();
  sub->add_option("--temperature", o->request.temperature, "Sampling temperature")->capture_default_str();
  sub->add_option("--top-p", o->request.top_p, "top_p (default: the server's)");
  sub->add_option("--seed", o->request.seed, "Seed sent (plus the sample index)");
  sub->add_option("--thinking", o->thinking, "default | on | off")->capture_default_str();
  sub->add_option("--reasoning-effort", o->request.reasoning_effort, "reasoning_effort sent (e.g. high)");
  sub->add_option("--n", o->n_samples, "Samples per item (pass@k needs n >= k)")->capture_default_str();
  sub->add_option("--k", o->ks, "k values of pass@k")->capture_default_str();
  sub->add_option("--concurrency", o->concurrency, "Requests in flight")->capture_default_str();
  sub->add_option("--timeout-s", o->request.timeout_s, "Seconds to wait for one answer")
      ->capture_default_str();
  sub->add_option("--limit", o->limit, "Only the first N items (0 = all)")->capture_default_str();
  sub->add_option("--log-file", o->log_file, "Per-sample JSONL log");
  sub->add_option("--result-file", o->result_file, "Summary JSON");
  sub->callback([o, &ctx] { ctx.exit_code = run_eval(*o); });
}

}  // namespace ds::cli
