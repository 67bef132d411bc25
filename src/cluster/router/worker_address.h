// Where a worker listens: only from the router's configuration (--worker, --workers-file), never
// from a request (serving-anchors §5.3: no request may steer the router to an address).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ds::cluster {

struct WorkerAddress {
  std::string url;   // as configured, normalised: "http://127.0.0.1:8001"
  std::string host;  // "127.0.0.1", "localhost", "[::1]" without brackets
  uint16_t port = 0;
  // The worker's KV event stream (`serve --kv-events-endpoint`), "" when it has none: then the
  // router's routing history stands in for it (docs/router.md, KV events).
  std::string events_endpoint;
  // The worker's replay socket (`serve --kv-events-replay-endpoint`), "" when none: a gap in the
  // event stream is then filled from it instead of forgetting the worker's blocks.
  std::string replay_endpoint;
};

// "http://HOST:PORT" with an optional trailing '/'; invalid_argument naming `what` otherwise (https,
// paths, user info and missing ports are refused: TLS to workers is not built).
Result<WorkerAddress> parse_worker_url(std::string_view url, std::string_view what);
// A ZeroMQ endpoint the router connects a SUB socket to: tcp://HOST:PORT or ipc://PATH.
Result<std::string> parse_events_endpoint(std::string_view endpoint, std::string_view what);
// `--worker-events URL=ENDPOINT`: sets the events endpoint of the configured worker URL (which must
// be one of `workers`).
Status attach_worker_events(std::vector<WorkerAddress>& workers, std::string_view spec);
// `--worker-events-replay URL=ENDPOINT`: sets the replay endpoint likewise.
Status attach_worker_replay(std::vector<WorkerAddress>& workers, std::string_view spec);
// One worker per line, `URL [events=ENDPOINT] [replay=ENDPOINT]`; blank lines and '#' comments
// skipped; errors name FILE:LINE (replay= without events= is one).
Result<std::vector<WorkerAddress>> read_workers_file(const std::string& path);

}  // namespace ds::cluster
