#include "cluster/router/worker_address.h"

#include <fmt/format.h>

#include <charconv>
#include <fstream>

namespace ds::cluster {

Result<WorkerAddress> parse_worker_url(std::string_view url, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return Status(ErrorCode::invalid_argument, fmt::format("{}: '{}': {}", what, url, why));
  };
  std::string_view rest = url;
  if (!rest.starts_with("http://")) return bad("expected http://HOST:PORT");
  rest.remove_prefix(7);
  if (rest.ends_with('/')) rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) return bad("no path, query or user info allowed");
  WorkerAddress a;
  size_t colon;
  if (rest.starts_with('[')) {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return bad("expected [IPv6]:PORT");
    a.host = std::string(rest.substr(1, close - 1));
    colon = close + 1;
  } else {
    colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0) return bad("missing :PORT");
    a.host = std::string(rest.substr(0, colon));
  }
  const std::string_view port = rest.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
    return bad("port must be in [1, 65535]");
  a.port = static_cast<uint16_t>(value);
  a.url = fmt::format("http://{}", rest);
  return a;
}

Result<std::string> parse_events_endpoint(std::string_view endpoint, std::string_view what) {
  auto bad = [&](std::string_view why) {
    return Status(ErrorCode::invalid_argument, fmt::format("{}: '{}': {}", what, endpoint, why));
  };
  if (endpoint.starts_with("ipc://")) {
    if (endpoint.size() == 6) return bad("expected ipc://PATH");
    return std::string(endpoint);
  }
  if (!endpoint.starts_with("tcp://")) return bad("expected tcp://HOST:PORT or ipc://PATH");
  const std::string_view rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return bad("missing :PORT");
  const std::string_view port = rest.substr(colon + 1);
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535)
    return bad("port must be in [1, 65535]");
  if (rest.substr(0, colon) == "*") return bad("a host to connect to, not '*'");
  return std::string(endpoint);
}

namespace {

// `flag URL=ENDPOINT`: sets `field` of the configured worker URL.
Status attach_worker_endpoint(std::vector<WorkerAddress>& workers, std::string_view spec,
                              std::string_view flag, std::string WorkerAddress::*field) {
  const size_t eq = spec.find('=');  // worker URLs hold no '=' (no query allowed)
  if (eq == std::string_view::npos)
    return Status(ErrorCode::invalid_argument,
                  fmt::format("{}: '{}': expected WORKER_URL=ENDPOINT", flag, spec));
  DS_ASSIGN_OR_RETURN(WorkerAddress a, parse_worker_url(spec.substr(0, eq), flag));
  DS_ASSIGN_OR_RETURN(std::string endpoint, parse_events_endpoint(spec.substr(eq + 1), flag));
  for (WorkerAddress& w : workers) {
    if (w.url != a.url) continue;
    if (field == &WorkerAddress::replay_endpoint && w.events_endpoint.empty())
      return Status(ErrorCode::invalid_argument,
                    fmt::format("{}: '{}' has no --worker-events endpoint to replay", flag, a.url));
    w.*field = std::move(endpoint);
    return ok_status();
  }
  return Status(ErrorCode::invalid_argument,
                fmt::format("{}: '{}' is not one of the configured workers", flag, a.url));
}

}  // namespace

Status attach_worker_events(std::vector<WorkerAddress>& workers, std::string_view spec) {
  return attach_worker_endpoint(workers, spec, "--worker-events", &WorkerAddress::events_endpoint);
}

Status attach_worker_replay(std::vector<WorkerAddress>& workers, std::string_view spec) {
  return attach_worker_endpoint(workers, spec, "--worker-events-replay", &WorkerAddress::replay_endpoint);
}

Result<std::vector<WorkerAddress>> read_workers_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status(ErrorCode::io_error, fmt::format("{}: cannot open", path));
  std::vector<WorkerAddress> out;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    std::string_view s = line;
    if (const size_t hash = s.find('#'); hash != std::string_view::npos) s = s.substr(0, hash);
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    if (s.empty()) continue;
    const std::string where = fmt::format("{}:{}", path, lineno);
    std::string_view url = s.substr(0, s.find_first_of(" \t"));
    std::string_view rest = s.substr(url.size());
    std::string_view events, replay;
    while (true) {
      while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t')) rest.remove_prefix(1);
      if (rest.empty()) break;
      const std::string_view field = rest.substr(0, rest.find_first_of(" \t"));
      rest.remove_prefix(field.size());
      if (field.starts_with("events=") && events.empty()) {
        events = field.substr(7);
      } else if (field.starts_with("replay=") && replay.empty()) {
        replay = field.substr(7);
      } else {
        return Status(ErrorCode::invalid_argument,
                      fmt::format("{}: '{}': expected URL [events=ENDPOINT] [replay=ENDPOINT]", where, line));
      }
    }
    DS_ASSIGN_OR_RETURN(WorkerAddress a, parse_worker_url(url, where));
    if (!events.empty()) {
      DS_ASSIGN_OR_RETURN(a.events_endpoint, parse_events_endpoint(events, where));
    }
    if (!replay.empty()) {
      if (events.empty())
        return Status(ErrorCode::invalid_argument, fmt::format("{}: replay= needs events= as well", where));
      DS_ASSIGN_OR_RETURN(a.replay_endpoint, parse_events_endpoint(replay, where));
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace ds::cluster
