// The model as `serve --expert-parallel` runs it (docs/expert-parallel.md): every rank has its own
// engine and requests, and the ranks step in lockstep. Each step is a "tick": every rank joins one
// allgather of "I have rows"; when any rank has, every rank runs a forward in that tick — its real
// one (the engine's) or forward_idle() — so the MoE layers always meet. The engine's forward joins
// a tick from the executor thread; a pump thread joins ticks while this rank's engine is idle.
// One mutex serializes both threads' MPI calls (MPI_THREAD_SERIALIZED). Shutdown is a collective
// too: a runner being destroyed keeps ticking as "leaving" (and serving the others' rows) until
// every rank is leaving, and then all of them stop in the same tick, so no rank is left waiting in
// a tick its peers will never join. With live EPLB, every tick
// that runs a main forward first gives LiveEplb its step (under the same mutex, on every rank alike).
// MTP forwards (speculative drafting) meet in their own ticks: a tick in which any rank wants a
// main forward is a main tick for every rank (a rank that wanted an MTP forward runs an idle main
// one and asks again); only a tick with no main forward wanted runs MTP forwards (forward_mtp_idle
// on the ranks without one). So the MoE exchanges of every rank come in the same order.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "model/model_runner.h"
#include "parallel/ep_exchange.h"
#include "parallel/live_eplb.h"
#include "parallel/mpi_comm.h"

namespace ds {

class EpStepRunner final : public ModelRunner {
 public:
  // inner's MoE layers must use `exchange`; comm, exchange and live_eplb (null = off) outlive the
  // runner. Starts the pump.
  EpStepRunner(std::unique_ptr<ModelRunner> inner, const MpiComm& comm, MpiExpertExchange& exchange,
               LiveEplb* live_eplb = nullptr);
  ~EpStepRunner() override;  // joins the pump once every rank is leaving
  EpStepRunner(const EpStepRunner&) = delete;
  EpStepRunner& operator=(const EpStepRunner&) = delete;

  const ModelConfig& config() const override { return inner_->config(); }
  KvCacheLayout kv_cache_layout() const override { return inner_->kv_cache_layout(); }
  Status init_kv_cache(const KvCacheConfig& cfg) override { return inner_->init_kv_cache(cfg); }
  const KvCacheConfig& kv_cache_config() const override { return inner_->kv_cache_config(); }
  Status forward(std::span<const ForwardRequest> requests, LogitsOutput& out) override;
  int64_t kv_block_bytes() const override { return inner_->kv_block_bytes(); }
  std::string kv_layout_tag() const override { return inner_->kv_layout_tag(); }
  Status export_kv_block(int32_t block_id, std::span<std::byte> out) const override {
    return inner_->export_kv_block(block_id, out);
  }
  Status import_kv_block(int32_t block_id, std::span<const std::byte> in) override {
    return inner_->import_kv_block(block_id, in);
  }
  std::vector<RoutedExpertSet*> routed_expert_sets() override { return inner_->routed_expert_sets(); }
  bool has_mtp() const override { return inner_->has_mtp(); }
  bool supports_mtp_drafting() const override { return inner_->supports_mtp_drafting(); }
  bool supports_truncation() const override { return inner_->supports_truncation(); }
  Status forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) override;
  Status set_mtp_draft_vocab(std::span<const int32_t> ids) override {
    return inner_->set_mtp_draft_vocab(ids);
  }

  // The first MPI or exchange failure of the pump (the engine's forwards return theirs).
  Status pump_status() const;
  // A copy of the exchange's counters, taken between steps (any thread; for /metrics).
  EpStats stats() const;
  // Ticks in which this rank ran forward_idle() for the other ranks.
  int64_t n_idle_steps() const;
  // The experts this rank holds now (live EPLB may change them between steps).
  std::vector<int32_t> local_experts() const;
  // Live EPLB's counters (zeros when off).
  LiveEplbStats live_eplb_stats() const;

 private:
  // What a rank says in a tick.
  enum class TickValue : int64_t { idle = 0, has_rows = 1, leaving = 2, has_mtp_rows = 3 };
  struct TickResult {
    bool any_rows = false;      // some rank runs a main forward: every rank does
    bool any_mtp_rows = false;  // some rank wants an MTP forward (run when no main one is wanted)
    bool all_leaving = false;   // every rank is being destroyed: all stop now
  };
  // One tick: allgather this rank's value. Call with mu_ held.
  Result<TickResult> tick(TickValue mine);
  // Live EPLB's step, before a tick's main forward. Call with mu_ held.
  Status before_forward();
  // A tick this rank has no forward of its own in, per `t`: an idle main or MTP forward. Call with
  // mu_ held.
  Status run_idle(const TickResult& t);
  void pump();

  std::unique_ptr<ModelRunner> inner_;
  const MpiComm& comm_;
  MpiExpertExchange& exchange_;
  LiveEplb* live_eplb_;
  std::vector<RoutedExpertSet*> expert_sets_;  // inner_'s MoE layers, for live EPLB
  mutable std::mutex mu_;                      // guards every MPI call, inner_'s forwards and pump_status_
  Status pump_status_;
  int64_t n_idle_steps_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> engine_waiting_{0};  // engine forwards waiting for mu_
  std::thread pump_;
};

}  // namespace ds
