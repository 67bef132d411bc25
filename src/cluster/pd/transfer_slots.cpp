#include "cluster/pd/transfer_slots.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace ds::pd {

TransferSlots::TransferSlots(Make make, Idle idle, int max_slots)
    : make_(std::move(make)), idle_(std::move(idle)), max_slots_(max_slots) {
  if (idle_) janitor_ = std::thread([this] { janitor(); });
}

TransferSlots::~TransferSlots() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (janitor_.joinable()) janitor_.join();
}

Result<TransferSlots::Checkout> TransferSlots::checkout() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // The janitor holds idle slots for microseconds: wait for them rather than make a new one.
    returned_cv_.wait(lock, [&] { return janitor_holding_ == 0; });
    if (!idle_slots_.empty()) {
      TransferSlot* slot = idle_slots_.back();
      idle_slots_.pop_back();
      return Checkout(this, slot);
    }
    if (static_cast<int>(all_.size()) + n_making_ >= max_slots_)
      return Status(ErrorCode::engine_overloaded, "every P/D transfer slot is busy");
    ++n_making_;
  }
  Result<std::unique_ptr<TransferSlot>> made = make_();  // not under the lock: UCX setup takes ms
  std::lock_guard<std::mutex> lock(mu_);
  --n_making_;
  if (!made.ok()) return made.status();
  TransferSlot* slot = made->get();
  all_.push_back(std::move(made).value());
  return Checkout(this, slot);
}

Status TransferSlots::prewarm(int n) {
  std::vector<Checkout> made;
  while (n_slots() < n) {
    Result<Checkout> c = checkout();
    if (!c.ok()) return c.status();
    made.push_back(std::move(c).value());
  }
  return ok_status();
}

int TransferSlots::n_slots() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(all_.size());
}

void TransferSlots::give_back(TransferSlot* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_slots_.push_back(slot);
}

void TransferSlots::janitor() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    stop_cv_.wait_for(lock, std::chrono::milliseconds(20));
    if (stop_) break;
    std::vector<TransferSlot*> idle;
    idle.swap(idle_slots_);  // checked out by the janitor meanwhile
    janitor_holding_ = static_cast<int>(idle.size());
    lock.unlock();
    for (TransferSlot* slot : idle) idle_(*slot);
    lock.lock();
    idle_slots_.insert(idle_slots_.begin(), idle.begin(), idle.end());
    janitor_holding_ = 0;
    returned_cv_.notify_all();
  }
}

}  // namespace ds::pd
