// One UCX context and worker (issue 15's KV transport; ARCHITECTURE `src/transport`): the owner of
// endpoints, registered memory, a listener for peers that connect, and the inbox of control
// frames that arrive as UCX active messages. Single-threaded: one thread drives a worker
// (UCS_THREAD_MODE_SINGLE); every wait is bounded by a deadline and progresses the worker.
//
// UCX picks the transport (tcp and shared memory here; RDMA on a cluster with no code change);
// UCX_TLS etc. in the environment are honoured, as UCX does.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace ds::transport {

class UcxEndpoint;
class RegisteredMemory;

using Deadline = std::chrono::steady_clock::time_point;

class UcxWorker {
 public:
  static Result<std::unique_ptr<UcxWorker>> create();
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Listens on host:port (0 = any free port; see listen_port()).
  Status listen(const std::string& host, uint16_t port);
  uint16_t listen_port() const { return listen_port_; }
  // The next peer that connected to the listener.
  Result<std::unique_ptr<UcxEndpoint>> accept(Deadline deadline);
  Result<std::unique_ptr<UcxEndpoint>> connect(const std::string& host, uint16_t port);

  // Registers [data, data + bytes) for remote writes (the KV pool: registered once).
  Result<std::unique_ptr<RegisteredMemory>> register_memory(void* data, size_t bytes);

  // The next control frame from any endpoint of this worker, in arrival order.
  Result<std::string> receive(Deadline deadline);

  // Control frames dropped because they arrived by rendezvous (too large for a control message).
  size_t refused_frames() const { return refused_frames_; }

  void progress();
  // Progresses until `request` (a UCX status pointer) completes or the deadline passes.
  Status wait(ucs_status_ptr_t request, Deadline deadline, const char* what);

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }

 private:
  UcxWorker() = default;
  static void on_connection(ucp_conn_request_h request, void* self);
  static ucs_status_t on_frame(void* self, const void* header, size_t header_bytes, void* data, size_t bytes,
                               const ucp_am_recv_param_t* param);

  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  ucp_listener_h listener_ = nullptr;
  uint16_t listen_port_ = 0;
  std::deque<ucp_conn_request_h> pending_connections_;
  std::deque<std::string> inbox_;
  size_t refused_frames_ = 0;  // rendezvous frames (too large for a control message)
};

// Active-message id of control frames.
inline constexpr unsigned kControlFrameAmId = 1;

}  // namespace ds::transport
