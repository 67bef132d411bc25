// PageWrites: how a prefill server writes a transfer's pages into the decode server's memory
// (docs/pd.md). Each write names a run of consecutive remote pages (one page array's pages of a
// run of consecutive pool blocks, or one state page) and where its bytes are here. A run inside the
// decode server's shared segment, mapped here (same host: transport/shared_pages.h), is written with
// memcpy; any other goes by a one-sided UCX put: staged into the slot's registered staging buffer
// (flushed only when it must be reused, and at the end), pipelined. Every destination is checked
// against the grant's regions first; every step is bounded by the transfer's deadline.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "kvcache/kv_tier.h"
#include "transport/control_message.h"
#include "transport/shared_pages.h"
#include "transport/ucx_endpoint.h"

namespace ds::pd {

class PageWrites {
 public:
  using Clock = std::chrono::steady_clock;
  // `keys`: the grant's regions' unpacked remote keys (index = region). `shared`: the decode
  // server's segment as mapped here, or null (every write is a put).
  PageWrites(transport::UcxEndpoint& ep, const transport::KvGrant& grant,
             const std::vector<transport::RemoteKey>& keys, std::span<std::byte> staging,
             const transport::SharedPageMapping* shared, Clock::time_point deadline)
      : ep_(ep), grant_(grant), keys_(keys), staging_(staging), shared_(shared), deadline_(deadline) {}

  // pages[i] (page_bytes each) goes to remote + i·page_bytes.
  Status write_run(std::span<const std::byte* const> pages, size_t page_bytes, uint64_t remote);
  // Every put so far is at the peer and every copy visible to it.
  Status finish();

  int64_t puts() const { return puts_; }
  int64_t shared_bytes() const { return shared_bytes_; }  // written with memcpy into the shared segment

 private:
  Result<std::byte*> stage(size_t bytes);

  transport::UcxEndpoint& ep_;
  const transport::KvGrant& grant_;
  const std::vector<transport::RemoteKey>& keys_;
  std::span<std::byte> staging_;
  const transport::SharedPageMapping* shared_;
  Clock::time_point deadline_;
  size_t used_ = 0;  // of the staging buffer, since its last flush
  int64_t puts_ = 0;
  int64_t shared_bytes_ = 0;
};

// A request's blocks (tier entries in the model's export order: a block's bytes are its page in each
// of the grant's arrays in turn) into the decode server's pool blocks `block_ids` (one each, in
// order): per page array, one write per run of consecutive block ids, a run no bigger than the
// staging buffer. internal for an entry of another size than the grant's block.
Status write_blocks(PageWrites& writes, size_t staging_bytes, const std::vector<TierEntry>& blocks,
                    std::span<const uint32_t> block_ids, const transport::KvGrant& grant);
// The sequence state's pages into the grant's state pages, one write each.
Status write_state(PageWrites& writes, const std::vector<std::vector<std::byte>>& pages,
                   const transport::KvGrant& grant);

}  // namespace ds::pd
