#include "cluster/router/health_poller.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <charconv>
#include <optional>
#include <string_view>

namespace ds::cluster {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

struct Reply {
  int status = 0;
  std::string body;
};

// A blocking GET with a deadline on the whole exchange; nullopt on any network failure.
std::optional<Reply> get(const WorkerAddress& a, const char* target, const HealthPollConfig& c) {
  try {
    net::io_context ioc;
    net::ip::tcp::resolver resolver(ioc);
    beast::tcp_stream stream(ioc);
    stream.expires_after(c.timeout);
    stream.connect(resolver.resolve(a.host, std::to_string(a.port)));
    http::request<http::empty_body> req(http::verb::get, target, 11);
    req.set(http::field::host, a.host);
    if (!c.worker_api_key.empty()) req.set(http::field::authorization, "Bearer " + c.worker_api_key);
    req.keep_alive(false);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    beast::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    return Reply{static_cast<int>(res.result_int()), std::move(res.body())};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The value of the first sample of `name` (no labels or any labels) in Prometheus text.
std::optional<double> sample(std::string_view text, std::string_view name) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.starts_with(name) || line.size() <= name.size()) continue;
    const char next = line[name.size()];
    if (next != ' ' && next != '{') continue;
    const size_t space = line.rfind(' ');
    double v = 0;
    const char* first = line.data() + space + 1;
    if (std::from_chars(first, line.data() + line.size(), v).ec == std::errc()) return v;
  }
  return std::nullopt;
}

}  // namespace

HealthPoller::HealthPoller(WorkerPool& pool, RequestRouter* router, HealthPollConfig config)
    : pool_(pool), router_(router), config_(std::move(config)), thread_([this] { run(); }) {}

HealthPoller::~HealthPoller() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HealthPoller::poll_once() {
  const auto workers = pool_.all();
  for (size_t id = 0; id < workers.size(); ++id) {
    WorkerState& w = *workers[id];
    if (!w.configured.load()) continue;
    const std::optional<Reply> health = get(w.address, "/health", config_);
    const bool up = health && health->status == 200;
    if (!up) {
      w.healthy.store(false);
      w.lost_cache.store(true);
      continue;
    }
    if (const std::optional<Reply> m = get(w.address, "/metrics", config_); m && m->status == 200) {
      w.reported_running.store(
          static_cast<int64_t>(sample(m->body, "deepinfer:num_requests_running").value_or(0)));
      w.reported_waiting.store(
          static_cast<int64_t>(sample(m->body, "deepinfer:num_requests_waiting").value_or(0)));
      w.reported_kv_usage.store(sample(m->body, "deepinfer:kv_cache_usage_perc").value_or(0));
      // The report covers what was sent before it (to within the scrape's own latency).
      w.report_prefill_tokens(
          static_cast<int64_t>(sample(m->body, "deepinfer:num_prefill_tokens_pending").value_or(0)));
    }
    if (w.lost_cache.exchange(false) && router_ != nullptr) router_->forget_worker(id);
    w.healthy.store(true);
  }
}

void HealthPoller::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    lock.unlock();
    poll_once();
    lock.lock();
    cv_.wait_for(lock, config_.period, [this] { return stop_; });
  }
}

}  // namespace ds::cluster
