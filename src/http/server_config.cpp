#include "http/server_config.h"

namespace ds::server {

Status validate_server_config(const ServerConfig& c) {
  auto bad = [](const char* what) { return Status(ErrorCode::invalid_argument, what); };
  if (c.host.empty()) return bad("server host must be set explicitly (e.g. 127.0.0.1)");
  if (c.n_io_threads < 1 || c.n_io_threads > 256) return bad("n_io_threads must be in [1, 256]");
  if (c.listen_backlog < 1) return bad("listen_backlog must be >= 1");
  if (c.max_connections < 1) return bad("max_connections must be >= 1");
  if (c.max_body_bytes < 1) return bad("max_body_bytes must be >= 1");
  if (c.max_header_bytes < 256) return bad("max_header_bytes must be >= 256");
  if (c.max_header_count < 1) return bad("max_header_count must be >= 1");
  if (c.idle_timeout.count() <= 0 || c.request_read_timeout.count() <= 0 || c.write_timeout.count() <= 0) {
    return bad("timeouts must be positive");
  }
  if (c.drain_timeout.count() < 0) return bad("drain_timeout must be >= 0");
  if (c.max_unsent_bytes < 1024) return bad("max_unsent_bytes must be >= 1024");
  if (c.retry_after_s < 0) return bad("retry_after_s must be >= 0");
  return ok_status();
}

}  // namespace ds::server
