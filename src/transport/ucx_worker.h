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
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace ds::transport {

class UcxEndpoint;
class RegisteredMemory;

using Deadline = std::chrono::steady_clock::time_point;

// Which UCX transports a worker may use (docs/pd.md, "Transports"). Empty = UCX's own choice
// (UCX_TLS from the environment, else all it finds); otherwise the UCX_TLS syntax, e.g. "tcp" (any
// host), "sm,tcp" or "cma,tcp" (same-host peers: shared memory), "rc,ud,sm,tcp" (InfiniBand/RoCE).
struct UcxOptions {
  std::string tls;
  bool spin = false;  // waits yield instead of sleeping on the wakeup fd (ucx_put_bench --spin)
};

// A control frame as it arrived, with the endpoint it came on (to answer on it).
struct Frame {
  std::string bytes;
  ucp_ep_h from = nullptr;
};

class UcxWorker {
 public:
  static Result<std::unique_ptr<UcxWorker>> create(const UcxOptions& options = {});
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  // Listens on host:port (0 = any free port; see listen_port()).
  Status listen(const std::string& host, uint16_t port);
  uint16_t listen_port() const { return listen_port_; }
  // The next peer that connected to the listener.
  Result<std::unique_ptr<UcxEndpoint>> accept(Deadline deadline);
  Result<std::unique_ptr<UcxEndpoint>> connect(const std::string& host, uint16_t port);

  // Endpoints the worker owns and keeps between transfers (issue 15: one connection per peer, made
  // once). connect_cached: the live endpoint to host:port, or a new one (a failed one is closed and
  // replaced). accept_pending: every peer that connected to the listener, accepted and kept.
  Result<UcxEndpoint*> connect_cached(const std::string& host, uint16_t port);
  // This worker's UCX address (its transports' addresses: shared memory for same-host peers, the
  // network otherwise), and an owned endpoint to a peer's, kept under `peer` like connect_cached's.
  // Connecting by address lets UCX pick every transport the two workers share (a sockaddr connection
  // in UCX 1.13 uses only the network ones); the address must come over an authenticated channel.
  Result<std::string> address() const;
  Result<UcxEndpoint*> connect_address_cached(const std::string& peer, const std::string& address);
  // Whether connect_cached holds an endpoint to host:port (closed ones are forgotten).
  bool has_peer(const std::string& host, uint16_t port) const;
  void accept_pending();
  // The owned endpoint a frame came on (nullptr: not one of this worker's).
  UcxEndpoint* find(ucp_ep_h ep) const;
  // Closes an owned endpoint now (forced: what it had in flight is dropped).
  void close(UcxEndpoint* endpoint);
  // Closes the owned endpoints whose peer failed.
  void close_failed();
  size_t n_endpoints() const { return owned_.size(); }

  // Registers [data, data + bytes) for remote writes (the KV pool: registered once).
  Result<std::unique_ptr<RegisteredMemory>> register_memory(void* data, size_t bytes);

  // The next control frame from any endpoint of this worker, in arrival order.
  Result<std::string> receive(Deadline deadline);
  Result<Frame> receive_frame(Deadline deadline);

  // Control frames dropped because they arrived by rendezvous (too large for a control message).
  size_t refused_frames() const { return refused_frames_; }

  void progress();
  // Progresses; when nothing was ready for 0.5 ms, sleeps until the worker has an event (its wakeup
  // fd) or `until` (at most 1 ms), so a waiting transfer does not take a core from the engine while
  // a stream of puts is still polled for.
  void progress_or_wait(Deadline until);
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
  int event_fd_ = -1;  // -1: the transports have no wakeup (or spin): waits yield instead
  std::chrono::steady_clock::time_point last_event_{};
  uint16_t listen_port_ = 0;
  std::deque<ucp_conn_request_h> pending_connections_;
  std::deque<Frame> inbox_;
  std::vector<std::unique_ptr<UcxEndpoint>> owned_;  // closed before the worker goes
  std::map<std::string, UcxEndpoint*> by_peer_;      // connect_cached: "host:port"
  size_t refused_frames_ = 0;                        // rendezvous frames (too large for a control message)
};

// Active-message id of control frames.
inline constexpr unsigned kControlFrameAmId = 1;

}  // namespace ds::transport
