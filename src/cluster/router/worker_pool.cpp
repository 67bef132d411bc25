#include "cluster/router/worker_pool.h"

#include <unordered_set>

namespace ds::cluster {

int64_t WorkerState::routed_prefill_tokens() const {
  std::lock_guard lock(prefill_mu_);
  return routed_prefill_;
}

uint64_t WorkerState::route_prefill(int64_t tokens) {
  std::lock_guard lock(prefill_mu_);
  routed_prefill_ += tokens;
  return prefill_epoch_;
}

void WorkerState::end_prefill(int64_t tokens, uint64_t epoch) {
  std::lock_guard lock(prefill_mu_);
  if (epoch == prefill_epoch_) routed_prefill_ -= tokens;
}

void WorkerState::report_prefill_tokens(int64_t pending) {
  std::lock_guard lock(prefill_mu_);
  reported_prefill_tokens.store(pending, std::memory_order_relaxed);
  routed_prefill_ = 0;
  ++prefill_epoch_;
}

std::vector<size_t> WorkerPool::set_workers(const std::vector<WorkerAddress>& addresses) {
  std::lock_guard lock(mu_);
  std::unordered_set<std::string> wanted;
  std::vector<size_t> added;
  for (const WorkerAddress& a : addresses) {
    if (!wanted.insert(a.url).second) continue;  // listed twice: one worker
    bool known = false;
    for (const auto& w : workers_) {
      if (w->address.url == a.url) {
        w->configured.store(true);
        known = true;
      }
    }
    if (!known) {
      workers_.push_back(std::make_shared<WorkerState>(a));
      added.push_back(workers_.size() - 1);
    }
  }
  for (const auto& w : workers_)
    if (!wanted.contains(w->address.url)) w->configured.store(false);
  return added;
}

size_t WorkerPool::size() const {
  std::lock_guard lock(mu_);
  return workers_.size();
}

std::shared_ptr<WorkerState> WorkerPool::at(size_t id) const {
  std::lock_guard lock(mu_);
  return id < workers_.size() ? workers_[id] : nullptr;
}

std::vector<std::shared_ptr<WorkerState>> WorkerPool::all() const {
  std::lock_guard lock(mu_);
  return workers_;
}

}  // namespace ds::cluster
