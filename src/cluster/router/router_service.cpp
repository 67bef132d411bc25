#include "cluster/router/router_service.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "http/api_routes.h"

namespace ds::cluster {
namespace {

using Clock = std::chrono::steady_clock;

// Client headers a worker needs to answer the same way; everything else (the client's API key
// above all) stays at the router.
constexpr const char* kForwardedHeaders[] = {"Content-Type", "Accept", "anthropic-version", "anthropic-beta"};

}  // namespace

Result<std::unique_ptr<RouterService>> RouterService::start(RouterServiceConfig config) {
  if (config.workers.empty())
    return Status(ErrorCode::invalid_argument, "the router needs at least one worker");
  if (config.n_relay_threads < 1) return Status(ErrorCode::invalid_argument, "n_relay_threads must be >= 1");
  if (config.routing.block_size_tokens < 1)
    return Status(ErrorCode::invalid_argument, "block size must be >= 1");
  if (config.relay.max_attempts < 1) return Status(ErrorCode::invalid_argument, "max_attempts must be >= 1");
  if (config.routing.policy == PolicyKind::cache_aware && config.rendering.tokenizer == nullptr)
    return Status(ErrorCode::invalid_argument, "the cache_aware policy needs the workers' tokenizer");
  std::vector<WorkerAddress> prefill;
  for (const std::string& url : config.prefill_urls) {
    DS_ASSIGN_OR_RETURN(WorkerAddress a, parse_worker_url(url, "--prefill"));
    prefill.push_back(std::move(a));
  }
  std::unique_ptr<RouterService> s(new RouterService(std::move(config)));
  s->pool_.set_workers(s->config_.workers);
  s->poller_ = std::make_unique<HealthPoller>(s->pool_, &s->router_, s->config_.health);
  s->poller_->poll_once();  // route from the first request on to the workers already up
  if (!prefill.empty()) {   // P/D: a prefill server that does not answer is listed last
    s->prefill_pool_.set_workers(prefill);
    s->prefill_poller_ = std::make_unique<HealthPoller>(s->prefill_pool_, nullptr, s->config_.health);
    s->prefill_poller_->poll_once();
  }
  // After the first poll, which forgets every worker's index once: events from now on are kept.
  s->kv_subscriber_ = std::make_unique<KvEventSubscriber>(s->pool_, s->router_, s->metrics_);
  s->registry_.add_collector([p = s.get(), seen = ConnectionPoolStats{}]() mutable {
    const ConnectionPoolStats now = p->connections_.stats();
    p->metrics_.connections.with({"reused"}).inc(static_cast<double>(now.reused - seen.reused));
    p->metrics_.connections.with({"opened"}).inc(static_cast<double>(now.opened - seen.opened));
    p->metrics_.connections.with({"dropped"}).inc(static_cast<double>(now.dropped - seen.dropped));
    seen = now;
    const auto workers = p->pool_.all();
    for (size_t i = 0; i < workers.size(); ++i)
      p->metrics_.index_blocks.with({workers[i]->address.url})
          .set(static_cast<double>(p->router_.prefix_index().n_blocks(i)));
    for (const auto& w : p->prefill_pool_.all())
      p->prefill_healthy_.with({w->address.url}).set(w->usable() ? 1.0 : 0.0);
    for (size_t k = 0; k < p->config_.prefill_urls.size(); ++k)
      p->prefill_open_gauge_.with({p->config_.prefill_urls[k]})
          .set(static_cast<double>(p->prefill_open_[k].load()));
    for (const auto& w : p->prefill_pool_.all())
      p->prefill_queue_gauge_.with({w->address.url}).set(static_cast<double>(w->prefill_queue_tokens()));
  });
  for (int i = 0; i < s->config_.n_relay_threads; ++i)
    s->threads_.emplace_back([p = s.get()] { p->ioc_.run(); });
  return s;
}

RouterService::RouterService(RouterServiceConfig config)
    : config_(std::move(config)),
      metrics_(registry_, pool_),
      router_(pool_, metrics_, config_.routing),
      prefill_open_(new std::atomic<int64_t>[std::max<size_t>(1, config_.prefill_urls.size())]()),
      prefill_healthy_(registry_.gauge_family("deepinfer_router:prefill_healthy",
                                              "1 while the prefill server answers /health", {"prefill"})),
      prefill_open_gauge_(registry_.gauge_family("deepinfer_router:prefill_open_requests",
                                                 "Open P/D requests the router sent to this prefill server",
                                                 {"prefill"})),
      prefill_queue_gauge_(registry_.gauge_family(
          "deepinfer_router:prefill_queue_tokens",
          "Prompt tokens queued on this prefill server: its last report plus what the router sent since",
          {"prefill"})),
      decode_prefills_(registry_.counter_family("deepinfer_router:pd_decode_prefills_total",
                                                "Requests sent to a decode server without a prefill server "
                                                "(reason: short prompt, busy prefill pool)",
                                                {"reason"})),
      work_(boost::asio::make_work_guard(ioc_)),
      connections_(config_.connections) {}

RelayContext RouterService::relay_context() {
  return RelayContext{&ioc_, &router_, &pool_, &metrics_, &config_.relay, &open_relays_, &connections_};
}

RouterService::~RouterService() {
  kv_subscriber_.reset();
  prefill_poller_.reset();
  poller_.reset();
  work_.reset();
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
}

void RouterService::set_workers(const std::vector<WorkerAddress>& workers) {
  pool_.set_workers(workers);
  poller_->poll_once();
}

size_t RouterService::n_usable_workers() const {
  size_t n = 0;
  for (const auto& w : pool_.all()) n += w->usable() ? 1 : 0;
  return n;
}

bool RouterService::refuse_if_overloaded(server::ResponseChannel& out) {
  if (open_relays_.load() < config_.max_open_requests) return false;
  server::HttpError e;
  e.http_status = 429;
  e.type = out.error_style() == server::ErrorStyle::anthropic ? "overloaded_error" : "rate_limit_error";
  e.message = "the router has too many open requests; retry later";
  e.code = "router_overloaded";
  e.retry_after_s = config_.relay.retry_after_s;
  out.send_http_error(e);
  return true;
}

RelayRequest RouterService::base_request(const server::ServerRequest& request) const {
  RelayRequest r;
  r.method = request.method;
  r.target = request.query.empty() ? request.path : request.path + "?" + request.query;
  r.request_id = request.request_id;
  for (const char* name : kForwardedHeaders)
    if (auto v = request.header(name)) r.forward_headers.emplace_back(name, std::string(*v));
  return r;
}

void RouterService::handle_generation(server::ApiKind kind, server::ServerRequest request,
                                      std::shared_ptr<server::ResponseChannel> out) {
  if (refuse_if_overloaded(*out)) return;
  const Clock::time_point t0 = Clock::now();
  RelayRequest r = base_request(request);
  // Only cache_aware needs the ids; the other policies skip rendering (the JSON is still read for "stream").
  PromptRendering rendering = config_.rendering;
  if (config_.routing.policy != PolicyKind::cache_aware && config_.pd_min_prompt_tokens == 0 &&
      config_.pd_max_prefill_queue_tokens == 0)
    rendering.tokenizer = nullptr;
  RequestPrompt prompt = request_prompt(kind, request.body, rendering);
  r.prompt_blocks =
      block_hashes(prompt.token_ids, config_.routing.block_size_tokens, root_block_hash(prompt.salt_tag));
  r.n_prompt_tokens = prompt.token_ids.size();
  r.session = std::move(prompt.session);
  // P/D: the worker imports the prompt's KV from this prefill server (serve --role decode).
  if (!config_.prefill_urls.empty()) {
    if (static_cast<int64_t>(r.n_prompt_tokens) < config_.pd_min_prompt_tokens) {
      decode_prefills_.with({"short_prompt"}).inc();
    } else if (std::optional<std::string> peers = prefill_peers(r.prompt_blocks, r.n_prompt_tokens, r.hold)) {
      r.forward_headers.emplace_back("X-DeepInfer-Prefill-Peer", std::move(*peers));
    } else {
      decode_prefills_.with({"prefill_busy"}).inc();
    }
  }
  r.prepare_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  r.body = std::move(request.body);
  start_relay(relay_context(), std::move(r), std::move(out));
}

std::optional<std::string> RouterService::prefill_peers(const std::vector<uint64_t>& prompt_blocks,
                                                        size_t n_prompt_tokens, std::shared_ptr<void>& hold) {
  const size_t n = config_.prefill_urls.size();
  // Healthy ones first (the poller's view: one that does not answer goes last, where the decode
  // server reaches it only when every other one failed); among them the least loaded, then the one
  // the prompt's first block hashes to (a prefix a prefill server has seen is in its prefix cache),
  // else round robin (no tokenizer, or a prompt under one block).
  const uint64_t start = prompt_blocks.empty() ? next_prefill_.fetch_add(1) : prompt_blocks.front();
  std::vector<size_t> order(n);
  for (size_t k = 0; k < n; ++k) order[k] = (start + k) % n;
  const auto down = [&](size_t k) { return k < prefill_pool_.size() && !prefill_pool_.at(k)->usable(); };
  const auto queue = [&](size_t k) {
    return k < prefill_pool_.size() ? prefill_pool_.at(k)->prefill_queue_tokens() : int64_t{0};
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (down(a) != down(b)) return !down(a);
    const int64_t open_a = prefill_open_[a].load(), open_b = prefill_open_[b].load();
    if (open_a != open_b) return open_a < open_b;
    return queue(a) < queue(b);
  });
  if (config_.pd_max_prefill_queue_tokens > 0 && queue(order[0]) >= config_.pd_max_prefill_queue_tokens)
    return std::nullopt;
  std::atomic<int64_t>* open = &prefill_open_[order[0]];
  // Counted only if under the limit (another relay thread may take the last place meanwhile).
  for (int64_t now = open->load();;) {
    if (config_.pd_max_prefill_open > 0 && now >= config_.pd_max_prefill_open) return std::nullopt;
    if (open->compare_exchange_weak(now, now + 1)) break;
  }
  std::shared_ptr<WorkerState> picked =
      order[0] < prefill_pool_.size() ? prefill_pool_.at(order[0]) : nullptr;
  const auto tokens = static_cast<int64_t>(n_prompt_tokens);
  const uint64_t epoch = picked ? picked->route_prefill(tokens) : 0;
  // When the request ends its prefill is over: the open place and the routed tokens go back.
  hold = std::shared_ptr<void>(nullptr, [open, picked, tokens, epoch](void*) {
    open->fetch_sub(1);
    if (picked) picked->end_prefill(tokens, epoch);
  });
  std::string list;
  for (size_t k : order) list += (list.empty() ? "" : ", ") + config_.prefill_urls[k];
  return list;
}

void RouterService::relay_plain(server::ServerRequest request, std::shared_ptr<server::ResponseChannel> out) {
  RelayRequest r = base_request(request);
  r.body = std::move(request.body);
  r.count_decision = false;
  start_relay(relay_context(), std::move(r), std::move(out));
}

Status RouterService::add_routes(server::RouteTable& routes) {
  using server::ResponseChannel;
  using server::RouteAccess;
  using server::ServerRequest;
  for (const server::ApiRoute& route : server::kGenerationRoutes) {
    const server::ApiKind kind = route.kind;
    DS_TRY(routes.add(std::string(route.method), std::string(route.path),
                      {route.error_style, RouteAccess::api_key},
                      [this, kind](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
                        handle_generation(kind, std::move(req), std::move(out));
                      }));
  }
  DS_TRY(routes.add("GET", "/v1/models", {server::ErrorStyle::openai, RouteAccess::api_key},
                    [this](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
                      relay_plain(std::move(req), std::move(out));
                    }));
  // /tokenize with "messages": the router's own rendering (what its block hashes are computed from),
  // so a test or an operator can compare it with a worker's /tokenize. Everything else goes to a worker.
  DS_TRY(routes.add(
      "POST", "/tokenize", {server::ErrorStyle::openai, RouteAccess::api_key},
      [this](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
        if (config_.rendering.tokenizer != nullptr) {
          nlohmann::ordered_json j = nlohmann::ordered_json::parse(req.body, nullptr, false);
          if (j.is_object() && j.contains("messages") && !j.contains("prompt")) {
            if (!j.contains("model")) j["model"] = "router";
            RequestPrompt p = request_prompt(server::ApiKind::chat_completions, j.dump(), config_.rendering);
            if (!p.token_ids.empty()) {
              out->send_json(200,
                             nlohmann::json{{"tokens", p.token_ids}, {"count", p.token_ids.size()}}.dump());
              return;
            }
          }
        }
        relay_plain(std::move(req), std::move(out));
      }));
  const server::RouteOptions operational{server::ErrorStyle::openai, RouteAccess::operational};
  DS_TRY(
      routes.add("GET", "/health", operational, [this](ServerRequest, std::shared_ptr<ResponseChannel> out) {
        if (stopping_.load()) {
          out->send_http_error(
              server::shutting_down_error(server::ErrorStyle::openai, config_.relay.retry_after_s));
          return;
        }
        out->send_json(200, R"({"status":"ok"})");
      }));
  DS_TRY(
      routes.add("GET", "/ready", operational, [this](ServerRequest, std::shared_ptr<ResponseChannel> out) {
        const size_t usable = n_usable_workers();
        if (usable == 0 || stopping_.load()) {
          server::HttpError e;
          e.http_status = 503;
          e.type = "service_unavailable";
          e.message = stopping_.load() ? "the router is shutting down" : "no worker is healthy";
          e.code = "not_ready";
          e.retry_after_s = config_.relay.retry_after_s;
          out->send_http_error(e);
          return;
        }
        out->send_json(200, nlohmann::json{{"status", "ready"}, {"workers", usable}}.dump());
      }));
  DS_TRY(
      routes.add("GET", "/metrics", operational, [this](ServerRequest, std::shared_ptr<ResponseChannel> out) {
        out->send(200, "text/plain; version=0.0.4; charset=utf-8", registry_.render());
      }));
  return ok_status();
}

}  // namespace ds::cluster
