#include "cluster/router/worker_pool.h"

#include <unordered_set>

namespace ds::cluster {

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
