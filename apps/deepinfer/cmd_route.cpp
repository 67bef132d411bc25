// deepinfer route: the cache- and load-aware load balancer in front of data-parallel `deepinfer
// serve` replicas (docs/router.md). It never loads a model: it reads the model directory's
// config.json (for the prompt encoding) and tokenizer only, so it renders and tokenizes each prompt
// exactly as the workers will. Waits for SIGINT/SIGTERM (drain, then stop) and SIGHUP (re-read
// --workers-file).
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "client_api_keys.h"
#include "cluster/router/router_service.h"
#include "cluster/router/worker_address.h"
#include "command_support.h"
#include "commands.h"
#include "http/api_keys.h"
#include "http/http_server.h"
#include "recipe/encoding.h"
#include "tokenizer/tokenizer.h"
#include "weights/model_config.h"

namespace ds::cli {

namespace {

struct RouteOptions {
  std::string host = "127.0.0.1";
  int port = 8080;
  std::vector<std::string> workers;
  std::vector<std::string> worker_events;    // WORKER_URL=ENDPOINT
  std::vector<std::string> worker_replays;   // WORKER_URL=ENDPOINT (after worker_events)
  std::vector<std::string> decode_workers;   // P/D decode servers (workers that import KV)
  std::vector<std::string> prefill_workers;  // P/D prefill servers (never sent client requests)
  int64_t pd_min_prompt_tokens = 0;
  int64_t pd_max_prefill_open = 0;
  int64_t pd_max_prefill_queue_tokens = 0;
  std::string workers_file;
  std::string policy = "cache_aware";
  std::string model_dir;      // config.json (encoding) + tokenizer of the workers' model
  std::string tokenizer_dir;  // overrides the model dir for the tokenizer
  std::string encoding;       // overrides config.json's model_type: deepseek_v3 | deepseek_v4 | ...
  std::vector<std::string> api_keys;
  std::string api_key_file;
  std::string worker_api_key;
  int block_size = 64;
  double cache_threshold = 0.5;
  int64_t balance_abs_threshold = 32;
  double balance_rel_threshold = 1.0001;
  int max_attempts = 3;
  int max_idle_connections = 32;  // per worker; 0 = a connection per attempt
  int64_t request_timeout_s = 600;
  int64_t max_open_requests = 4096;
  int health_period_ms = 500;
  int retry_after_s = 1;
  int io_threads = 1;
  int relay_threads = 1;
};

Result<std::vector<cluster::WorkerAddress>> configured_workers(const RouteOptions& o) {
  std::vector<cluster::WorkerAddress> out;
  for (const std::string& url : o.decode_workers) {
    DS_ASSIGN_OR_RETURN(cluster::WorkerAddress a, cluster::parse_worker_url(url, "--decode"));
    out.push_back(std::move(a));
  }
  for (const std::string& url : o.workers) {
    DS_ASSIGN_OR_RETURN(cluster::WorkerAddress a, cluster::parse_worker_url(url, "--worker"));
    out.push_back(std::move(a));
  }
  if (!o.workers_file.empty()) {
    DS_ASSIGN_OR_RETURN(std::vector<cluster::WorkerAddress> more, cluster::read_workers_file(o.workers_file));
    out.insert(out.end(), more.begin(), more.end());
  }
  for (const std::string& spec : o.worker_events) DS_TRY(cluster::attach_worker_events(out, spec));
  for (const std::string& spec : o.worker_replays) DS_TRY(cluster::attach_worker_replay(out, spec));
  return out;
}

// The encoding the workers use: --encoding, else config.json's model_type; nullopt when neither.
Result<std::optional<recipe::PromptEncodingKind>> worker_encoding(const RouteOptions& o) {
  if (!o.encoding.empty()) {
    for (auto kind : {recipe::PromptEncodingKind::deepseek_v3, recipe::PromptEncodingKind::deepseek_v4,
                      recipe::PromptEncodingKind::deepseek_v41}) {
      if (o.encoding == recipe::prompt_encoding_name(kind)) return std::optional(kind);
    }
    return Status(ErrorCode::invalid_argument, "--encoding: unknown encoding '" + o.encoding + "'");
  }
  if (o.model_dir.empty()) return std::optional<recipe::PromptEncodingKind>();
  DS_ASSIGN_OR_RETURN(ModelConfig config, load_model_config(o.model_dir));
  DS_ASSIGN_OR_RETURN(recipe::PromptEncodingKind kind,
                      recipe::prompt_encoding_for_model_type(config.model_type));
  return std::optional(kind);
}

int run_route(const RouteOptions& o) {
  const std::string cmd = "route";
  if (o.port < 0 || o.port > 65535) return report_usage_error(cmd, "--port must be in [0, 65535]");
  Result<cluster::PolicyKind> policy = cluster::parse_policy(o.policy);
  if (!policy.ok()) return report_usage_error(cmd, "--policy: " + policy.status().message());
  Result<std::vector<cluster::WorkerAddress>> workers = configured_workers(o);
  if (!workers.ok()) return report_usage_error(cmd, workers.status().message());
  if (workers->empty())
    return report_usage_error(cmd, "give at least one --worker, --decode or a --workers-file");

  server::ServerConfig server_config;
  server_config.host = o.host;
  server_config.port = static_cast<uint16_t>(o.port);
  server_config.n_io_threads = o.io_threads;
  server_config.retry_after_s = o.retry_after_s;
  if (int rc = load_client_api_keys(cmd, o.api_keys, o.api_key_file, server_config.api_keys); rc != 0)
    return rc;
  if (Status st = server::validate_server_config(server_config); !st.ok())
    return report_usage_error(cmd, st.message());

  // The workers' tokenizer and encoding: what makes the router's block hashes the workers' own.
  std::optional<Tokenizer> tokenizer;
  const std::string tokenizer_dir = !o.tokenizer_dir.empty() ? o.tokenizer_dir : o.model_dir;
  if (!tokenizer_dir.empty()) {
    Result<Tokenizer> tok = Tokenizer::load(tokenizer_dir);
    if (!tok.ok()) return report_error(cmd, tok.status());
    tokenizer.emplace(std::move(tok).value());
  }
  Result<std::optional<recipe::PromptEncodingKind>> encoding = worker_encoding(o);
  if (!encoding.ok()) return report_error(cmd, encoding.status());
  if (*policy == cluster::PolicyKind::cache_aware && (!tokenizer || !*encoding))
    return report_usage_error(cmd,
                              "--policy cache_aware needs --model DIR (or --tokenizer DIR and --encoding)");

  cluster::RouterServiceConfig rc;
  rc.workers = std::move(workers).value();
  for (const std::string& url : o.prefill_workers) {
    Result<cluster::WorkerAddress> a = cluster::parse_worker_url(url, "--prefill");
    if (!a.ok()) return report_usage_error(cmd, a.status().message());
    rc.prefill_urls.push_back(url);
  }
  rc.pd_min_prompt_tokens = o.pd_min_prompt_tokens;
  rc.pd_max_prefill_open = o.pd_max_prefill_open;
  rc.pd_max_prefill_queue_tokens = o.pd_max_prefill_queue_tokens;
  rc.routing.policy = *policy;
  rc.routing.block_size_tokens = o.block_size;
  rc.routing.thresholds.cache_threshold = o.cache_threshold;
  rc.routing.thresholds.balance_abs_threshold = o.balance_abs_threshold;
  rc.routing.thresholds.balance_rel_threshold = o.balance_rel_threshold;
  rc.routing.seed = std::random_device{}();
  rc.relay.worker_api_key = o.worker_api_key;
  rc.relay.max_attempts = o.max_attempts;
  if (o.max_idle_connections < 0) return report_usage_error(cmd, "--max-idle-connections must be >= 0");
  rc.connections.max_idle_per_worker = static_cast<size_t>(o.max_idle_connections);
  rc.relay.request_timeout = std::chrono::seconds(o.request_timeout_s);
  rc.relay.retry_after_s = o.retry_after_s;
  rc.health.period = std::chrono::milliseconds(o.health_period_ms);
  rc.health.worker_api_key = o.worker_api_key;
  rc.rendering.tokenizer = tokenizer ? &*tokenizer : nullptr;
  if (*encoding) {
    rc.rendering.encoding = **encoding;
    // As serve does: V3 has no thinking mode, later encodings think unless asked not to.
    rc.rendering.conversion.default_thinking = **encoding != recipe::PromptEncodingKind::deepseek_v3;
  }
  rc.n_relay_threads = o.relay_threads;
  rc.max_open_requests = o.max_open_requests;

  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&signals, s);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);  // before any thread starts: all inherit the mask

  Result<std::unique_ptr<cluster::RouterService>> service = cluster::RouterService::start(std::move(rc));
  if (!service.ok()) return report_usage_error(cmd, service.status().message());
  server::RouteTable routes;
  if (Status st = (*service)->add_routes(routes); !st.ok()) return report_error(cmd, st);
  const Logger log(LogLevel::info);
  Result<std::unique_ptr<server::HttpServer>> http =
      server::HttpServer::start(server_config, std::move(routes), log, nullptr);
  if (!http.ok()) return report_error(cmd, http.status());
  std::printf("deepinfer route: listening on http://%s:%u (%zu of the workers usable, policy %s)\n",
              o.host.c_str(), static_cast<unsigned>((*http)->port()), (*service)->n_usable_workers(),
              o.policy.c_str());
  std::fflush(stdout);

  for (;;) {
    int signal_number = 0;
    sigwait(&signals, &signal_number);
    if (signal_number != SIGHUP) {
      std::fprintf(stderr, "deepinfer route: signal %d, draining\n", signal_number);
      break;
    }
    if (o.workers_file.empty()) continue;
    Result<std::vector<cluster::WorkerAddress>> reloaded = configured_workers(o);
    if (!reloaded.ok()) {
      std::fprintf(stderr, "deepinfer route: SIGHUP: %s (keeping the old list)\n",
                   reloaded.status().message().c_str());
      continue;
    }
    (*service)->set_workers(*reloaded);
    std::fprintf(stderr, "deepinfer route: SIGHUP: %zu workers configured, %zu usable\n", reloaded->size(),
                 (*service)->n_usable_workers());
  }
  (*service)->begin_shutdown();
  (*http)->shutdown();  // in-flight relays finish (drain_timeout), then the rest are cut off
  service->reset();
  return 0;
}

}  // namespace

void add_route_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<RouteOptions>();
  CLI::App* sub = app.add_subcommand("route", "Load-balance the API across deepinfer serve replicas");
  sub->add_option("--host", o->host, "Address to bind")->capture_default_str();
  sub->add_option("--port", o->port, "Port (0 = a free one, printed at start)")->capture_default_str();
  sub->add_option("--worker", o->workers, "Worker URL http://HOST:PORT (repeatable)");
  sub->add_option(
      "--worker-events", o->worker_events,
      "WORKER_URL=tcp://HOST:PORT: the worker's KV event stream (serve --kv-events-endpoint; repeatable)");
  sub->add_option(
      "--worker-events-replay", o->worker_replays,
      "WORKER_URL=tcp://HOST:PORT: the worker's replay socket (serve --kv-events-replay-endpoint; "
      "fills gaps in its event stream; repeatable)");
  sub->add_option(
      "--workers-file", o->workers_file,
      "File of workers, one 'URL [events=ENDPOINT] [replay=ENDPOINT]' per line; re-read on SIGHUP");
  sub->add_option(
      "--decode", o->decode_workers,
      "P/D decode server URL (serve --role decode; repeatable): a worker that imports the prompt KV");
  sub->add_option("--prefill", o->prefill_workers,
                  "P/D prefill server URL (serve --role prefill; repeatable): healthy and least loaded first "
                  "(docs/pd.md)");
  sub->add_option("--pd-min-prompt-tokens", o->pd_min_prompt_tokens,
                  "Prompts shorter than this prefill on the decode server (conditional disaggregation)")
      ->capture_default_str();
  sub->add_option(
         "--pd-max-prefill-open", o->pd_max_prefill_open,
         "While the least loaded prefill server has this many open P/D requests, requests prefill on "
         "the decode server (conditional disaggregation; 0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--pd-max-prefill-queue-tokens", o->pd_max_prefill_queue_tokens,
                  "While the picked prefill server has this many prompt tokens queued (its reported "
                  "num_prefill_tokens_pending plus what the router sent since), requests prefill on the "
                  "decode server (needs --model for the prompt's length; 0 = no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--policy", o->policy, "cache_aware | least_load | round_robin | random")
      ->capture_default_str();
  sub->add_option("--model", o->model_dir,
                  "The workers' model directory (config.json + tokenizer; no weights read)");
  sub->add_option("--tokenizer", o->tokenizer_dir, "Tokenizer directory (default: --model)");
  sub->add_option("--encoding", o->encoding, "Prompt encoding (default: from --model's config.json)");
  sub->add_option("--api-key", o->api_keys, "API key clients must send (repeatable)");
  sub->add_option("--api-key-file", o->api_key_file, "File of client API keys, one per line");
  sub->add_option("--worker-api-key", o->worker_api_key, "API key the router sends to the workers");
  sub->add_option("--block-size", o->block_size, "The workers' KV block size in tokens")
      ->capture_default_str();
  sub->add_option("--cache-threshold", o->cache_threshold, "cache_aware: prefix match rate that wins")
      ->capture_default_str();
  sub->add_option("--balance-abs-threshold", o->balance_abs_threshold,
                  "cache_aware: load gap that forces balance")
      ->capture_default_str();
  sub->add_option("--balance-rel-threshold", o->balance_rel_threshold,
                  "cache_aware: load ratio that forces balance")
      ->capture_default_str();
  sub->add_option("--max-attempts", o->max_attempts, "Workers tried per request before the first byte")
      ->capture_default_str();
  sub->add_option("--max-idle-connections", o->max_idle_connections,
                  "Kept-alive connections per worker (0: one connection per request)")
      ->capture_default_str();
  sub->add_option("--request-timeout-s", o->request_timeout_s, "Deadline of one request, retries included")
      ->capture_default_str();
  sub->add_option("--max-open-requests", o->max_open_requests, "Open requests; beyond: 429 + Retry-After")
      ->capture_default_str();
  sub->add_option("--health-period-ms", o->health_period_ms, "Worker /health and /metrics poll period")
      ->capture_default_str();
  sub->add_option("--retry-after-s", o->retry_after_s, "Retry-After seconds on 429/503")
      ->capture_default_str();
  sub->add_option("--io-threads", o->io_threads, "HTTP io threads (clients)")->capture_default_str();
  sub->add_option("--relay-threads", o->relay_threads, "io threads of the worker connections")
      ->capture_default_str();
  sub->callback([o, &ctx] {
    try {
      ctx.exit_code = run_route(*o);
    } catch (const std::exception& e) {
      ctx.exit_code = report_error("route", Status(ErrorCode::internal, e.what()));
    }
  });
}

}  // namespace ds::cli
