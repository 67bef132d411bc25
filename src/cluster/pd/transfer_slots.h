// TransferSlots: the UCX workers of a P/D service (docs/pd.md, "Transport"), each a UCX context +
// worker that lives as long as the server, with what it keeps between transfers: its endpoints (one
// per peer, made once), its listener (decode side: the port prefill servers connect to) and its
// registered memory (decode side: the KV pool and the landing region; prefill side: a staging buffer). A
// transfer checks a slot out, so a worker is only ever driven by one thread at a time (UCX single-thread
// mode); a new slot is made only when every one is busy, up to max_slots.
//
// Between transfers a janitor thread progresses the idle slots every 20 ms (a peer that connects or
// writes to an idle slot is answered; failed endpoints are closed).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "transport/registered_memory.h"
#include "transport/shared_pages.h"
#include "transport/ucx_worker.h"

namespace ds::pd {

struct TransferSlot {
  std::unique_ptr<transport::UcxWorker> worker;
  std::unique_ptr<transport::RegisteredMemory> memory;  // registered once, with this slot's context
  // Decode side: the KV pool's extents (pool_lender.h), registered once, in PoolLender::extents order.
  std::vector<std::unique_ptr<transport::RegisteredMemory>> pool_memory;
  std::vector<std::byte> staging;  // prefill side: the registered staging buffer
  // Prefill side: the registered buffer a transfer's LayerCopies copies pages into as each layer of
  // its prefill ends, for the puts the transfer thread issues (layer_copies.h).
  std::vector<std::byte> layer_staging;
  std::unique_ptr<transport::RegisteredMemory> layer_memory;
  // Prefill side: the shared segments of same-host decode servers (transport/shared_pages.h), by
  // "host:port" of their transfer slot; a null mapping: not usable here (the puts go over UCX).
  struct PeerSegment {
    transport::SharedSegmentRef ref;
    std::shared_ptr<const transport::SharedPageMapping> mapping;  // shared with a transfer's LayerCopies
    std::string host;
    uint16_t port = 0;
  };
  std::map<std::string, PeerSegment> peer_segments;
  ~TransferSlot() {
    peer_segments.clear();
    pool_memory.clear();
    layer_memory.reset();  // before the worker (and its context) go
    memory.reset();
    worker.reset();
  }
};

class TransferSlots {
 public:
  using Make = std::function<Result<std::unique_ptr<TransferSlot>>()>;
  using Idle = std::function<void(TransferSlot&)>;
  // `idle` (may be empty: no janitor) runs on the janitor thread for each idle slot.
  TransferSlots(Make make, Idle idle, int max_slots);
  ~TransferSlots();  // stops the janitor; the slots go (their checkouts must have ended)
  TransferSlots(const TransferSlots&) = delete;
  TransferSlots& operator=(const TransferSlots&) = delete;

  class Checkout {
   public:
    Checkout(TransferSlots* owner, TransferSlot* slot) : owner_(owner), slot_(slot) {}
    Checkout(Checkout&& o) noexcept : owner_(std::exchange(o.owner_, nullptr)), slot_(o.slot_) {}
    Checkout& operator=(Checkout&&) = delete;
    ~Checkout() {
      if (owner_ != nullptr) owner_->give_back(slot_);
    }
    TransferSlot& operator*() const { return *slot_; }
    TransferSlot* operator->() const { return slot_; }

   private:
    TransferSlots* owner_;
    TransferSlot* slot_;
  };
  // An idle slot, else a new one; engine_overloaded when max_slots are busy.
  Result<Checkout> checkout();
  // Makes slots until `n` exist (the first at start: its setup is not paid by a request).
  Status prewarm(int n);
  int n_slots() const;

 private:
  void give_back(TransferSlot* slot);
  void janitor();

  const Make make_;
  const Idle idle_;
  const int max_slots_;
  mutable std::mutex mu_;
  std::condition_variable stop_cv_;
  std::condition_variable returned_cv_;  // the janitor gave its slots back
  bool stop_ = false;
  int janitor_holding_ = 0;
  int n_making_ = 0;
  std::vector<std::unique_ptr<TransferSlot>> all_;
  std::vector<TransferSlot*> idle_slots_;
  std::thread janitor_;  // last: started once the rest exists
};

}  // namespace ds::pd
