// Memory registered with UCX for one-sided remote writes (the decode side's KV pool; issue 15):
// mapped once, its packed remote key handed to peers in a kv_grant. RAII: unmapped on destruction.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <string>

namespace ds::transport {

class RegisteredMemory {
 public:
  RegisteredMemory(ucp_context_h context, ucp_mem_h memh, void* data, size_t bytes, std::string packed_rkey)
      : context_(context), memh_(memh), data_(data), bytes_(bytes), packed_rkey_(std::move(packed_rkey)) {}
  ~RegisteredMemory();
  RegisteredMemory(const RegisteredMemory&) = delete;
  RegisteredMemory& operator=(const RegisteredMemory&) = delete;

  uint64_t address() const { return reinterpret_cast<uint64_t>(data_); }
  size_t bytes() const { return bytes_; }
  const std::string& packed_rkey() const { return packed_rkey_; }

 private:
  ucp_context_h context_;
  ucp_mem_h memh_;
  void* data_;
  size_t bytes_;
  std::string packed_rkey_;
};

}  // namespace ds::transport
