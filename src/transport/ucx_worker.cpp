#include "transport/ucx_worker.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "transport/registered_memory.h"
#include "transport/ucx_endpoint.h"

namespace ds::transport {

namespace {

Status ucx_error(std::string_view what, ucs_status_t status) {
  return {ErrorCode::transport_io, fmt::format("UCX {}: {}", what, ucs_status_string(status))};
}

Result<sockaddr_in> ipv4_address(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1)
    return Status(ErrorCode::invalid_argument, fmt::format("'{}' is not an IPv4 address", host));
  return addr;
}

bool passed(Deadline deadline) { return std::chrono::steady_clock::now() >= deadline; }

}  // namespace

Result<std::unique_ptr<UcxWorker>> UcxWorker::create(const UcxOptions& options) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  ucp_config_t* config = nullptr;
  if (ucs_status_t st = ucp_config_read(nullptr, nullptr, &config); st != UCS_OK)
    return ucx_error("config", st);
  if (!options.tls.empty()) {
    if (ucs_status_t st = ucp_config_modify(config, "TLS", options.tls.c_str()); st != UCS_OK) {
      ucp_config_release(config);
      return Status(ErrorCode::invalid_argument,
                    fmt::format("UCX transports '{}': {}", options.tls, ucs_status_string(st)));
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
  const ucs_status_t init = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (init != UCS_OK) return ucx_error("init", init);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (ucs_status_t st = ucp_worker_create(w->context_, &wp, &w->worker_); st != UCS_OK)
    return ucx_error("worker", st);
  if (options.spin || ucp_worker_get_efd(w->worker_, &w->event_fd_) != UCS_OK) w->event_fd_ = -1;
  ucp_am_handler_param_t am{};
  am.field_mask =
      UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  am.id = kControlFrameAmId;
  am.cb = &UcxWorker::on_frame;
  am.arg = w.get();
  if (ucs_status_t st = ucp_worker_set_am_recv_handler(w->worker_, &am); st != UCS_OK)
    return ucx_error("active-message handler", st);
  return w;
}

UcxWorker::~UcxWorker() {
  by_peer_.clear();
  owned_.clear();  // endpoints close (bounded) while the worker still progresses
  for (ucp_conn_request_h request : pending_connections_) ucp_listener_reject(listener_, request);
  if (listener_ != nullptr) ucp_listener_destroy(listener_);
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

void UcxWorker::on_connection(ucp_conn_request_h request, void* self) {
  static_cast<UcxWorker*>(self)->pending_connections_.push_back(request);
}

ucs_status_t UcxWorker::on_frame(void* self, const void* /*header*/, size_t /*header_bytes*/, void* data,
                                 size_t bytes, const ucp_am_recv_param_t* param) {
  auto* w = static_cast<UcxWorker*>(self);
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0) {
    ++w->refused_frames_;  // a control frame never needs rendezvous; dropping it is the refusal
    return UCS_OK;
  }
  Frame frame{std::string(static_cast<const char*>(data), bytes), nullptr};
  if ((param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP) != 0) frame.from = param->reply_ep;
  w->inbox_.push_back(std::move(frame));
  return UCS_OK;
}

Status UcxWorker::listen(const std::string& host, uint16_t port) {
  DS_ASSIGN_OR_RETURN(sockaddr_in addr, ipv4_address(host, port));
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  lp.sockaddr.addrlen = sizeof(addr);
  lp.conn_handler.cb = &UcxWorker::on_connection;
  lp.conn_handler.arg = this;
  if (ucs_status_t st = ucp_listener_create(worker_, &lp, &listener_); st != UCS_OK)
    return ucx_error(fmt::format("listen on {}:{}", host, port), st);
  ucp_listener_attr_t attr{};
  attr.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (ucs_status_t st = ucp_listener_query(listener_, &attr); st != UCS_OK)
    return ucx_error("listener query", st);
  listen_port_ = ntohs(reinterpret_cast<const sockaddr_in*>(&attr.sockaddr)->sin_port);
  return ok_status();
}

Result<std::unique_ptr<UcxEndpoint>> UcxWorker::accept(Deadline deadline) {
  if (listener_ == nullptr) return Status(ErrorCode::invalid_argument, "accept without listen");
  while (pending_connections_.empty()) {
    if (passed(deadline))
      return Status(ErrorCode::transport_timeout, "no peer connected before the deadline");
    progress_or_wait(deadline);
  }
  ucp_conn_request_h request = pending_connections_.front();
  pending_connections_.pop_front();
  auto endpoint = std::make_unique<UcxEndpoint>(*this, nullptr);
  ucp_ep_params_t ep{};
  ep.field_mask =
      UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.conn_request = request;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxEndpoint::on_error;
  ep.err_handler.arg = endpoint.get();
  if (ucs_status_t st = ucp_ep_create(worker_, &ep, &endpoint->ep_); st != UCS_OK)
    return ucx_error("accept endpoint", st);
  return endpoint;
}

Result<std::unique_ptr<UcxEndpoint>> UcxWorker::connect(const std::string& host, uint16_t port) {
  DS_ASSIGN_OR_RETURN(sockaddr_in addr, ipv4_address(host, port));
  auto endpoint = std::make_unique<UcxEndpoint>(*this, nullptr);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&addr);
  ep.sockaddr.addrlen = sizeof(addr);
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxEndpoint::on_error;
  ep.err_handler.arg = endpoint.get();
  if (ucs_status_t st = ucp_ep_create(worker_, &ep, &endpoint->ep_); st != UCS_OK)
    return ucx_error(fmt::format("connect to {}:{}", host, port), st);
  return endpoint;
}

Result<std::unique_ptr<RegisteredMemory>> UcxWorker::register_memory(void* data, size_t bytes) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = data;
  mp.length = bytes;
  ucp_mem_h memh = nullptr;
  if (ucs_status_t st = ucp_mem_map(context_, &mp, &memh); st != UCS_OK) return ucx_error("memory map", st);
  void* packed = nullptr;
  size_t packed_bytes = 0;
  if (ucs_status_t st = ucp_rkey_pack(context_, memh, &packed, &packed_bytes); st != UCS_OK) {
    ucp_mem_unmap(context_, memh);
    return ucx_error("remote key pack", st);
  }
  std::string rkey(static_cast<const char*>(packed), packed_bytes);
  ucp_rkey_buffer_release(packed);
  return std::make_unique<RegisteredMemory>(context_, memh, data, bytes, std::move(rkey));
}

Result<std::string> UcxWorker::receive(Deadline deadline) {
  DS_ASSIGN_OR_RETURN(Frame frame, receive_frame(deadline));
  return std::move(frame.bytes);
}

Result<Frame> UcxWorker::receive_frame(Deadline deadline) {
  while (inbox_.empty()) {
    if (passed(deadline))
      return Status(ErrorCode::transport_timeout, "no control message before the deadline");
    progress_or_wait(deadline);
  }
  Frame frame = std::move(inbox_.front());
  inbox_.pop_front();
  return frame;
}

Result<UcxEndpoint*> UcxWorker::connect_cached(const std::string& host, uint16_t port) {
  const std::string peer = fmt::format("{}:{}", host, port);
  if (auto it = by_peer_.find(peer); it != by_peer_.end()) {
    if (!it->second->failed()) return it->second;
    close(it->second);
  }
  DS_ASSIGN_OR_RETURN(std::unique_ptr<UcxEndpoint> ep, connect(host, port));
  UcxEndpoint* raw = ep.get();
  owned_.push_back(std::move(ep));
  by_peer_[peer] = raw;
  return raw;
}

bool UcxWorker::has_peer(const std::string& host, uint16_t port) const {
  return by_peer_.contains(fmt::format("{}:{}", host, port));
}

Result<std::string> UcxWorker::address() const {
  ucp_address_t* addr = nullptr;
  size_t bytes = 0;
  if (ucs_status_t st = ucp_worker_get_address(worker_, &addr, &bytes); st != UCS_OK)
    return ucx_error("worker address", st);
  std::string out(reinterpret_cast<const char*>(addr), bytes);
  ucp_worker_release_address(worker_, addr);
  return out;
}

Result<UcxEndpoint*> UcxWorker::connect_address_cached(const std::string& peer, const std::string& address) {
  if (auto it = by_peer_.find(peer); it != by_peer_.end()) {
    if (!it->second->failed()) return it->second;
    close(it->second);
  }
  auto endpoint = std::make_unique<UcxEndpoint>(*this, nullptr);
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &UcxEndpoint::on_error;
  ep.err_handler.arg = endpoint.get();
  if (ucs_status_t st = ucp_ep_create(worker_, &ep, &endpoint->ep_); st != UCS_OK)
    return ucx_error("connect to a worker address", st);
  UcxEndpoint* raw = endpoint.get();
  owned_.push_back(std::move(endpoint));
  by_peer_[peer] = raw;
  return raw;
}

void UcxWorker::accept_pending() {
  progress();
  while (!pending_connections_.empty()) {
    Result<std::unique_ptr<UcxEndpoint>> ep = accept(std::chrono::steady_clock::now());
    if (ep.ok()) owned_.push_back(std::move(ep).value());
  }
}

UcxEndpoint* UcxWorker::find(ucp_ep_h ep) const {
  if (ep == nullptr) return nullptr;
  for (const auto& e : owned_)
    if (e->ep_ == ep) return e.get();
  return nullptr;
}

void UcxWorker::close(UcxEndpoint* endpoint) {
  std::erase_if(by_peer_, [&](const auto& kv) { return kv.second == endpoint; });
  for (auto it = owned_.begin(); it != owned_.end(); ++it) {
    if (it->get() != endpoint) continue;
    endpoint->failed_ = true;  // forced close: nothing in flight survives it
    owned_.erase(it);
    return;
  }
}

void UcxWorker::close_failed() {
  std::vector<UcxEndpoint*> failed;
  for (const auto& e : owned_)
    if (e->failed()) failed.push_back(e.get());
  for (UcxEndpoint* e : failed) close(e);
}

void UcxWorker::progress_or_wait(Deadline until) {
  const auto now = std::chrono::steady_clock::now();
  if (ucp_worker_progress(worker_) != 0) {
    last_event_ = now;
    return;
  }
  // Right after an event (a stream of puts landing) keep polling for a moment; sleep when idle.
  if (event_fd_ < 0 || now - last_event_ < std::chrono::microseconds(500)) {
    std::this_thread::yield();
    return;
  }
  // Armed: the fd turns readable on the next event; busy means events are pending already.
  if (ucp_worker_arm(worker_) != UCS_OK) return;
  const auto left =
      std::chrono::duration_cast<std::chrono::microseconds>(until - std::chrono::steady_clock::now());
  const auto wait = std::clamp<int64_t>(left.count(), 0, 1000);
  pollfd fd{event_fd_, POLLIN, 0};
  const timespec ts{0, static_cast<long>(wait * 1000)};
  (void)ppoll(&fd, 1, &ts, nullptr);
}

void UcxWorker::progress() {
  // Drain what is ready; yield when nothing was, so a bounded wait does not spin a core flat out.
  if (ucp_worker_progress(worker_) == 0) std::this_thread::yield();
}

Status UcxWorker::wait(ucs_status_ptr_t request, Deadline deadline, const char* what) {
  if (request == nullptr) return ok_status();
  if (UCS_PTR_IS_ERR(request)) return ucx_error(what, UCS_PTR_STATUS(request));
  while (true) {
    const ucs_status_t st = ucp_request_check_status(request);
    if (st != UCS_INPROGRESS) {
      ucp_request_free(request);
      return st == UCS_OK ? ok_status() : ucx_error(what, st);
    }
    if (passed(deadline)) {
      ucp_request_cancel(worker_, request);
      const auto grace = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      while (ucp_request_check_status(request) == UCS_INPROGRESS && !passed(grace)) progress();
      ucp_request_free(request);
      return {ErrorCode::transport_timeout, fmt::format("UCX {}: not complete before the deadline", what)};
    }
    progress_or_wait(deadline);
  }
}

}  // namespace ds::transport
