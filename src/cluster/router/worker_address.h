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
};

// "http://HOST:PORT" with an optional trailing '/'; invalid_argument naming `what` otherwise (https,
// paths, user info and missing ports are refused: TLS to workers is not built).
Result<WorkerAddress> parse_worker_url(std::string_view url, std::string_view what);
// One URL per line; blank lines and '#' comments skipped; errors name FILE:LINE.
Result<std::vector<WorkerAddress>> read_workers_file(const std::string& path);

}  // namespace ds::cluster
