#include "transport/ucx_endpoint.h"

#include <fmt/format.h>

namespace ds::transport {

RemoteKey::~RemoteKey() {
  if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
}

RemoteKey& RemoteKey::operator=(RemoteKey&& other) noexcept {
  if (this != &other) {
    if (rkey_ != nullptr) ucp_rkey_destroy(rkey_);
    rkey_ = std::exchange(other.rkey_, nullptr);
  }
  return *this;
}

UcxEndpoint::~UcxEndpoint() {
  if (ep_ == nullptr) return;
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = failed_ ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  ucs_status_ptr_t request = ucp_ep_close_nbx(ep_, &rp);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) return;
  // A peer that vanished must not hang the close: bounded, then leave it to worker destruction.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (ucp_request_check_status(request) == UCS_INPROGRESS && std::chrono::steady_clock::now() < deadline)
    worker_.progress();
  ucp_request_free(request);
}

void UcxEndpoint::on_error(void* self, ucp_ep_h /*ep*/, ucs_status_t /*status*/) {
  static_cast<UcxEndpoint*>(self)->failed_ = true;
}

Status UcxEndpoint::send(std::string_view frame, Deadline deadline) {
  if (failed_) return {ErrorCode::transport_io, "UCX send: the peer failed"};
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  rp.flags = UCP_AM_SEND_FLAG_EAGER | UCP_AM_SEND_FLAG_REPLY;  // the peer can answer on this endpoint
  ucs_status_ptr_t request =
      ucp_am_send_nbx(ep_, kControlFrameAmId, nullptr, 0, frame.data(), frame.size(), &rp);
  return worker_.wait(request, deadline, "send");
}

Result<RemoteKey> UcxEndpoint::unpack_remote_key(std::string_view packed) {
  ucp_rkey_h rkey = nullptr;
  if (ucs_status_t st = ucp_ep_rkey_unpack(ep_, packed.data(), &rkey); st != UCS_OK)
    return Status(ErrorCode::transport_bad_message,
                  fmt::format("UCX remote key unpack: {}", ucs_status_string(st)));
  return RemoteKey(rkey);
}

Status UcxEndpoint::put(const void* data, size_t bytes, uint64_t remote_address, const RemoteKey& key) {
  if (failed_) return {ErrorCode::transport_io, "UCX put: the peer failed"};
  ucp_request_param_t rp{};
  ucs_status_ptr_t request = ucp_put_nbx(ep_, data, bytes, remote_address, key.get(), &rp);
  if (UCS_PTR_IS_ERR(request))
    return {ErrorCode::transport_io, fmt::format("UCX put: {}", ucs_status_string(UCS_PTR_STATUS(request)))};
  // In flight: UCX frees the request when it completes; the endpoint flush orders after it.
  if (request != nullptr) ucp_request_free(request);
  return ok_status();
}

Status UcxEndpoint::flush(Deadline deadline) {
  if (failed_) return {ErrorCode::transport_io, "UCX flush: the peer failed"};
  ucp_request_param_t rp{};
  return worker_.wait(ucp_ep_flush_nbx(ep_, &rp), deadline, "flush");
}

}  // namespace ds::transport
