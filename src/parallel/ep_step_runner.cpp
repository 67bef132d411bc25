#include "parallel/ep_step_runner.h"

#include <algorithm>
#include <chrono>
#include <vector>

namespace ds {

namespace {
// How long an idle rank waits between ticks when no rank has work: the latency a busy rank's step
// can wait for an idle peer to join, against the CPU an idle server spends polling.
constexpr auto kIdleTickInterval = std::chrono::microseconds(500);
}  // namespace

EpStepRunner::EpStepRunner(std::unique_ptr<ModelRunner> inner, const MpiComm& comm,
                           MpiExpertExchange& exchange, LiveEplb* live_eplb)
    : inner_(std::move(inner)), comm_(comm), exchange_(exchange), live_eplb_(live_eplb) {
  if (live_eplb_ != nullptr) expert_sets_ = inner_->routed_expert_sets();
  pump_ = std::thread([this] { pump(); });
}

EpStepRunner::~EpStepRunner() {
  stop_.store(true);
  if (pump_.joinable()) pump_.join();
}

Result<EpStepRunner::TickResult> EpStepRunner::tick(TickValue mine) {
  std::vector<int64_t> all;
  DS_TRY(comm_.allgather_i64(static_cast<int64_t>(mine), all));
  TickResult r;
  r.any_rows = std::any_of(all.begin(), all.end(),
                           [](int64_t v) { return v == static_cast<int64_t>(TickValue::has_rows); });
  r.any_mtp_rows = std::any_of(all.begin(), all.end(),
                               [](int64_t v) { return v == static_cast<int64_t>(TickValue::has_mtp_rows); });
  r.all_leaving = std::all_of(all.begin(), all.end(),
                              [](int64_t v) { return v == static_cast<int64_t>(TickValue::leaving); });
  return r;
}

Status EpStepRunner::before_forward() {
  if (live_eplb_ == nullptr) return Status();
  return live_eplb_->after_step(comm_, exchange_, expert_sets_);
}

Status EpStepRunner::run_idle(const TickResult& t) {
  Status st;
  if (t.any_rows) {
    ++n_idle_steps_;
    st = before_forward();
    if (st.ok()) st = inner_->forward_idle();
  } else if (t.any_mtp_rows) {
    st = inner_->forward_mtp_idle();
  }
  if (st.ok()) st = exchange_.status();
  return st;
}

Status EpStepRunner::forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) {
  engine_waiting_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  engine_waiting_.fetch_sub(1);
  for (;;) {
    DS_ASSIGN_OR_RETURN(TickResult t, tick(TickValue::has_mtp_rows));
    if (!t.any_rows) break;  // an MTP tick: every rank runs its MTP forward or an idle one
    DS_TRY(run_idle(t));     // a main tick first (another rank's forward): serve it, ask again
  }
  Status st = inner_->forward_mtp(requests, out);
  if (st.ok() && !exchange_.status().ok()) return exchange_.status();
  return st;
}

Status EpStepRunner::forward(std::span<const ForwardRequest> requests, LogitsOutput& out) {
  engine_waiting_.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  engine_waiting_.fetch_sub(1);
  DS_TRY(tick(TickValue::has_rows).status());
  DS_TRY(before_forward());
  Status st = inner_->forward(requests, out);
  if (st.ok() && !exchange_.status().ok()) return exchange_.status();
  return st;
}

void EpStepRunner::pump() {
  for (;;) {
    const bool leaving = stop_.load();  // set by the destructor: the engine sends no more forwards
    // The engine's step goes first: its tick counts as this rank's.
    if (!leaving && engine_waiting_.load() > 0) {
      std::this_thread::yield();
      continue;
    }
    bool any = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!pump_status_.ok()) return;
      Result<TickResult> t = tick(leaving ? TickValue::leaving : TickValue::idle);
      if (!t.ok()) {
        pump_status_ = t.status();
        return;
      }
      if (t->all_leaving) return;  // every rank saw the same values: all stop in this tick
      any = t->any_rows || t->any_mtp_rows;
      if (Status st = run_idle(*t); !st.ok()) {
        pump_status_ = st;
        return;
      }
    }
    if (!any) std::this_thread::sleep_for(kIdleTickInterval);
  }
}

Status EpStepRunner::pump_status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pump_status_;
}

EpStats EpStepRunner::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exchange_.stats();
}

int64_t EpStepRunner::n_idle_steps() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_idle_steps_;
}

std::vector<int32_t> EpStepRunner::local_experts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return exchange_.local_experts();
}

LiveEplbStats EpStepRunner::live_eplb_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_eplb_ != nullptr ? live_eplb_->stats() : LiveEplbStats{};
}

}  // namespace ds
