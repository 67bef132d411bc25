// The prefill role (`deepinfer serve --role prefill`, docs/pd.md): POST /v1/pd/prefill from a decode
// server names a prompt and the decode server's UCX listener. On a thread of its own the service
// connects there, proves itself (hello, HMAC of the shared secret, model fingerprint + KV layout
// hash), waits for the decode server's grant, prefills the prompt on its engine (the first token it
// samples is dropped: the decode server samples), takes the prompt's blocks from the outbox tier the
// engine wrote them to, writes them into the granted blocks (page_writes.h: UCX puts, or memcpy into a
// same-host decode server's shared pool), flushes and reports kv_written. An abort
// from the decode server (its client went away, its lease ran out) cancels the engine request.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "base/log.h"
#include "base/status.h"
#include "cluster/pd/job_threads.h"
#include "cluster/pd/pd_identity.h"
#include "cluster/pd/transfer_slots.h"
#include "cluster/pd/transit_tier.h"
#include "engine/engine.h"
#include "http/route_table.h"

namespace ds::pd {

struct PrefillStats {
  std::atomic<int64_t> transfers{0};
  std::atomic<int64_t> failures{0};
  std::atomic<int64_t> blocks_sent{0};
  std::atomic<int64_t> bytes_sent{0};
  std::atomic<int64_t> puts{0};  // one-sided puts (one per page array and run of blocks, per state page)
  // Of bytes_sent: copied into same-host decode servers' shared segments.
  std::atomic<int64_t> shared_bytes{0};
  // Of blocks_sent: copied layer by layer while their prefill ran (LayerCopies).
  std::atomic<int64_t> blocks_by_layer{0};
  std::atomic<int64_t> prefill_ns{0};     // engine time of the transfers' prefills
  std::atomic<int64_t> transfer_ns{0};    // puts + flush after the prefills ended
  std::atomic<int64_t> blocks_early{0};   // blocks put while their prefill still ran (stream_puts)
  std::atomic<int64_t> refused_hosts{0};  // requests naming a decode_host outside the allowlist
};

struct PrefillServiceConfig {
  int max_transfers = 64;                      // concurrent; beyond: 503 (the decode side prefills)
  std::chrono::milliseconds max_wait{60'000};  // cap on a transfer's whole run
  // Called once per transfer: the prefill (engine queue + compute + outbox), of which the engine
  // queue (queued until first scheduled), and the puts + flush after the prefill.
  std::function<void(double prefill_seconds, double queue_seconds, double put_seconds)> observe;
  // The addresses of the decode servers' UCX listeners this server may connect to (their
  // --kv-transfer-host); a request naming another decode_host is refused before anything runs.
  std::vector<std::string> allowed_decode_hosts;
  transport::UcxOptions ucx;  // the UCX transports (--kv-transport)
  // Each slot's registered staging buffer: the granted blocks are copied there and put in runs of
  // consecutive block ids (one put per run, flushed per buffer-full).
  size_t staging_bytes = size_t{16} << 20;
  // Put each granted block as soon as the prefill's chunk that completes it is done
  // (Request::tier_write_chunks), overlapping the puts with the rest of the prefill; false: put
  // them all once the prefill is over (--kv-stream-puts).
  bool stream_puts = true;
  // Write with memcpy into a decode server's shared segment when its grant names one this process
  // can map (same host; transport/shared_pages.h); false: always UCX puts (--kv-shared-memory).
  bool shared_memory = true;
};

class PrefillService {
 public:
  PrefillService(Engine& engine, std::shared_ptr<TransitTier> outbox,
                 std::shared_ptr<const PdIdentity> identity, PrefillServiceConfig config, const Logger* log);
  ~PrefillService();  // joins the transfers (each bounded)

  Status add_routes(server::RouteTable& routes);
  const PrefillStats& stats() const { return stats_; }
  int n_running() const { return jobs_.n_running(); }
  int n_slots() const { return slots_->n_slots(); }

  struct Job {
    uint64_t request_id = 0;
    std::vector<int32_t> tokens;
    std::string cache_salt;
    std::string decode_host;
    uint16_t decode_port = 0;
    std::chrono::steady_clock::time_point deadline;
  };
  struct Outcome {
    int64_t blocks = 0;
    int64_t bytes = 0;
    int64_t prefill_ns = 0;
    int64_t queue_ns = 0;         // of prefill_ns: in this engine's queue (queued until first scheduled)
    int64_t transfer_ns = 0;      // puts + flush after the prefill ended (the ones before overlapped it)
    int64_t blocks_early = 0;     // blocks put while the prefill still ran (stream_puts)
    int64_t puts = 0;             // UCX put calls (per page array and run of consecutive blocks; state pages)
    int64_t shared_bytes = 0;     // of bytes: copied into the decode server's shared segment
    int64_t blocks_by_layer = 0;  // of blocks: copied layer by layer as the prefill's forwards ran
    int64_t state_bytes = 0;      // the sequence state sent with the blocks (V4), in their count
  };
  // One transfer, on the calling thread.
  Result<Outcome> run(const Job& job);

 private:
  Engine& engine_;
  std::shared_ptr<TransitTier> outbox_;
  std::shared_ptr<const PdIdentity> identity_;
  const PrefillServiceConfig config_;
  const Logger* log_;
  PrefillStats stats_;
  std::unique_ptr<TransferSlots> slots_;
  JobThreads jobs_;  // last: joined first
};

}  // namespace ds::pd
