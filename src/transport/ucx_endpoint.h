// A connection to one peer over UCX (issue 15): control frames as eager active messages, and
// one-sided puts of KV pages into the peer's registered memory. Owned by the caller; the worker that
// made it must outlive it. A peer that fails makes later operations return transport_io.
#pragma once

#include <ucp/api/ucp.h>

#include <string>
#include <string_view>
#include <utility>

#include "transport/ucx_worker.h"

namespace ds::transport {

// The peer's packed remote key, unpacked for this endpoint (RAII: destroyed with it).
class RemoteKey {
 public:
  RemoteKey() = default;
  explicit RemoteKey(ucp_rkey_h rkey) : rkey_(rkey) {}
  ~RemoteKey();
  RemoteKey(RemoteKey&& other) noexcept : rkey_(std::exchange(other.rkey_, nullptr)) {}
  RemoteKey& operator=(RemoteKey&& other) noexcept;
  ucp_rkey_h get() const { return rkey_; }

 private:
  ucp_rkey_h rkey_ = nullptr;
};

class UcxEndpoint {
 public:
  UcxEndpoint(UcxWorker& worker, ucp_ep_h ep) : worker_(worker), ep_(ep) {}
  ~UcxEndpoint();
  UcxEndpoint(const UcxEndpoint&) = delete;
  UcxEndpoint& operator=(const UcxEndpoint&) = delete;

  // Sends one control frame (eager: control frames are small) and waits for local completion.
  Status send(std::string_view frame, Deadline deadline);
  Result<RemoteKey> unpack_remote_key(std::string_view packed);
  // Starts writing [data, data + bytes) to remote_address in the peer's region and returns at once
  // (puts pipeline: a page per call, one flush per layer or request). The bytes must stay unchanged
  // until flush() returns; a failed put shows up as flush()'s error.
  Status put(const void* data, size_t bytes, uint64_t remote_address, const RemoteKey& key);
  // Every earlier put is visible at the peer once this returns ok.
  Status flush(Deadline deadline);
  bool failed() const { return failed_; }
  ucp_ep_h handle() const { return ep_; }

 private:
  static void on_error(void* self, ucp_ep_h ep, ucs_status_t status);
  friend class UcxWorker;

  UcxWorker& worker_;
  ucp_ep_h ep_ = nullptr;
  bool failed_ = false;
};

}  // namespace ds::transport
