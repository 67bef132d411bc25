// The decode role (`deepinfer serve --role decode`, docs/pd.md). For a generation request the router
// sent with a prefill peer (header X-DeepInfer-Prefill-Peer), on a thread of its own:
//   1. lease: fresh blocks of this server's KV pool for the prompt's blocks it does not hold
//      (PoolLender: the engine reserves and pins them), plus pages of a small landing region for
//      the sequence state (V4/V4.1), for at most lease_timeout;
//   2. a transfer slot (transfer_slots.h: a UCX worker kept for the server's lifetime, listening on
//      its own port, the pool's memory and the landing region registered with it once), and
//      POST /v1/pd/prefill to the prefill server naming the prompt and the slot's port (the prefill
//      server keeps its connection to that port between transfers);
//   3. the prefill server's hello is checked (HMAC of the shared secret, model fingerprint, KV layout
//      hash; a refusal is logged with the reason), then hello_accept and a kv_grant naming the pool's
//      page arrays and the reserved block ids (and, with a shared pool, its segment) go back; the
//      pages arrive by one-sided puts straight into the pool, or are copied there by a prefill server
//      on this host that mapped the segment; kv_written ends the transfer;
//   4. the engine adopts the blocks as the prompt's cached blocks and the request is submitted: its
//      admission hits them like any prefix (its own cached blocks and SSD / Redis tier restores
//      first), computes the rest of the prompt (at least its last token) and samples the first token
//      here, so sampling and the stream live on this server. The pins go when the request ends.
// Any failure (prefill server down, refused, killed mid-transfer, the lease ran out) drops the lease
// and submits the request anyway: it is prefilled here. A client that goes away aborts the transfer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "cluster/pd/job_threads.h"
#include "cluster/pd/landing_region.h"
#include "cluster/pd/pd_identity.h"
#include "cluster/pd/pool_index.h"
#include "cluster/pd/pool_lender.h"
#include "cluster/pd/transfer_slots.h"
#include "engine/request.h"
#include "transport/shared_pages.h"

namespace ds::pd {

inline constexpr const char* kPrefillPeerHeader = "X-DeepInfer-Prefill-Peer";

struct DecodeStats {
  std::atomic<int64_t> imports{0};    // requests whose KV arrived from a prefill server
  std::atomic<int64_t> fallbacks{0};  // transfers that failed: prefilled here
  std::atomic<int64_t> refusals{0};   // peers refused (secret, model, layout)
  std::atomic<int64_t> blocks_received{0};
  std::atomic<int64_t> bytes_received{0};
  std::atomic<int64_t> transfer_ns{0};        // lease start to kv_written, summed over imports
  std::atomic<int64_t> leased_blocks{0};      // pool blocks held by transfers and landed requests now
  std::atomic<int64_t> local_blocks{0};       // prompt blocks found in this server's pool (not asked for)
  std::atomic<int64_t> local_tier_blocks{0};  // found in this server's SSD / Redis tiers (not asked for)
  std::atomic<int64_t> local_only{0};         // P/D requests whose blocks were all cached here
  std::atomic<int64_t> stale_frames{0};       // frames of transfers already over (answered with abort)
  std::atomic<int64_t> retries{0};            // transfers tried on another prefill server after a failure
};

struct DecodeServiceConfig {
  std::string transfer_host = "127.0.0.1";  // where prefill servers reach this server's UCX listener
  std::chrono::milliseconds lease_timeout{30'000};
  // The landing region for sequence states (V4/V4.1; none for a model without state): states in
  // flight at most; beyond, requests prefill here.
  int64_t landing_bytes = int64_t{1} << 30;
  int max_transfers = 64;
  // Transfer slots made at start (more are made when every one is busy, up to max_transfers). Each
  // registers the whole KV pool with its own UCX context: on RDMA, where registering pins the pages,
  // a slot made under load pays that, so a busy server wants several made up front.
  int prewarm_slots = 1;
  transport::UcxOptions ucx;  // the UCX transports (--kv-transport)
  // The segment the KV pool was allocated from (EngineConfig::kv_memory; --kv-shared-memory), or
  // null: the landing region comes from it too, and grants name it so a prefill server on the same
  // host writes the pages with memcpy (transport/shared_pages.h); others still put over UCX.
  std::shared_ptr<transport::SharedPageMemory> shared_pages;
  std::chrono::milliseconds failure_cooldown{5'000};
  std::string prefill_api_key;  // sent to the prefill servers (their --api-key), if not empty
  // Called once per import with lease start to kv_written (the TTFT part before this engine's
  // queue: the prefill server's queue + prefill + puts); empty = none.
  std::function<void(double seconds)> observe_import;
  // Leading blocks of the keys after the pool's cached prefix that this server's own tiers (SSD,
  // Redis) hold: restored from there, not asked for. Empty = none.
  std::function<int64_t(std::span<const uint64_t> keys)> count_local_tier_blocks;
};

class DecodeService {
 public:
  // `lender`: this server's KV pool. `pool` (may be null): its cached blocks; only the blocks after
  // its longest cached prefix are asked for.
  DecodeService(std::shared_ptr<PoolLender> lender, std::shared_ptr<const PdIdentity> identity,
                std::shared_ptr<const PoolIndex> pool, DecodeServiceConfig config, const Logger* log);
  ~DecodeService();  // joins the transfers (each bounded by its lease)

  using Resume = std::function<void(Request request, std::shared_ptr<void> lease)>;
  // Calls `resume` exactly once, on another thread (or this one when no transfer is attempted).
  // `client_gone` is polled during the transfer. `prefill_urls`: the prefill servers to try, in the
  // router's order (its pick first); a server whose transfer failed is tried after the others for
  // the next `failure_cooldown`. When every one fails the request is prefilled here.
  void start(std::vector<std::string> prefill_urls, Request request, std::function<bool()> client_gone,
             Resume resume);

  const DecodeStats& stats() const { return *stats_; }
  // The landing region of the sequence states (null for a model without state).
  const LandingRegion* region() const { return region_.get(); }
  int n_slots() const { return slots_->n_slots(); }

 private:
  struct Lease;
  // The transfer of one request; ok = the blocks are in this server's pool, adopted as the prompt's
  // cached blocks and held by the returned lease, and, for a model with sequence state (V4),
  // `request.state_import` holds the prefill server's. Blocks [first, n) of the prompt's transfer
  // keys; [0, first) are cached here.
  Result<std::shared_ptr<void>> transfer(const std::string& prefill_url, Request& request, size_t first,
                                         const std::function<bool()>& client_gone);
  bool answer_stale(transport::UcxWorker& worker, const transport::Frame& frame,
                    std::optional<uint64_t> current);

  std::shared_ptr<PoolLender> lender_;
  std::shared_ptr<const PdIdentity> identity_;
  std::shared_ptr<const PoolIndex> pool_;
  const DecodeServiceConfig config_;
  const Logger* log_;
  std::shared_ptr<DecodeStats> stats_;  // shared with the leases, which may outlive the service
  std::atomic<uint64_t> next_request_id_;
  std::mutex failed_mu_;
  std::map<std::string, std::chrono::steady_clock::time_point> failed_until_;  // prefill url -> cooldown end
  std::unique_ptr<LandingRegion> region_;
  // What every grant says of the shared segment (config_.shared_pages), taken once it is final.
  std::optional<transport::SharedSegmentRef> shared_ref_;
  std::vector<transport::SharedRange> shared_ranges_;
  std::unique_ptr<TransferSlots> slots_;  // after region_: unregistered before it goes (and before the pool)
  JobThreads jobs_;                       // last: joined first
};

}  // namespace ds::pd
