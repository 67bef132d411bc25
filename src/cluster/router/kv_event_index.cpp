#include "cluster/router/kv_event_index.h"

#include <span>

namespace ds::cluster {

KvEventIndex::KvEventIndex(PrefixIndex& index, int block_size_tokens)
    : index_(index), block_size_tokens_(block_size_tokens) {}

KvEventApplyCounts KvEventIndex::apply(size_t worker, const WorkerKvEventBatch& batch) {
  KvEventApplyCounts counts;
  std::lock_guard lock(mu_);
  if (worker >= workers_.size()) workers_.resize(worker + 1);
  WorkerBlocks& w = workers_[worker];
  for (const WorkerKvEvent& ev : batch.events) {
    switch (ev.kind) {
      case WorkerKvEvent::Kind::stored:
        store(worker, w, ev, counts);
        break;
      case WorkerKvEvent::Kind::removed:
        remove(worker, w, ev, counts);
        break;
      case WorkerKvEvent::Kind::all_cleared:
        w = WorkerBlocks{};
        index_.clear(worker);
        ++counts.cleared;
        break;
    }
  }
  return counts;
}

void KvEventIndex::store(size_t worker, WorkerBlocks& w, const WorkerKvEvent& ev,
                         KvEventApplyCounts& counts) {
  uint64_t prev = root_block_hash(ev.salt_tag);
  if (ev.parent_hash) {
    const auto parent = w.router_hash_of.find(*ev.parent_hash);
    if (parent == w.router_hash_of.end()) {
      counts.blocks_dropped += ev.block_hashes.size();
      return;
    }
    prev = parent->second;
  }
  if (ev.block_size != block_size_tokens_) {
    counts.blocks_dropped += ev.block_hashes.size();
    return;
  }
  const std::span<const int32_t> ids(ev.token_ids);
  const auto bs = static_cast<size_t>(block_size_tokens_);
  std::vector<uint64_t> run;
  run.reserve(ev.block_hashes.size());
  for (size_t b = 0; b < ev.block_hashes.size(); ++b) {
    prev = chain_block_hash(prev, ids.subspan(b * bs, bs));
    run.push_back(prev);
    if (w.router_hash_of.emplace(ev.block_hashes[b], prev).second) {
      ++w.refs[prev];
      ++counts.blocks_stored;
    }
  }
  index_.record(worker, run);  // the whole run, known blocks too: they are touched as recently used
}

void KvEventIndex::remove(size_t worker, WorkerBlocks& w, const WorkerKvEvent& ev,
                          KvEventApplyCounts& counts) {
  std::vector<uint64_t> gone;
  for (const uint64_t h : ev.block_hashes) {
    const auto it = w.router_hash_of.find(h);
    if (it == w.router_hash_of.end()) continue;  // stored before the router subscribed
    ++counts.blocks_removed;
    const auto ref = w.refs.find(it->second);
    if (ref != w.refs.end() && --ref->second == 0) {
      gone.push_back(it->second);
      w.refs.erase(ref);
    }
    w.router_hash_of.erase(it);
  }
  if (!gone.empty()) index_.remove(worker, gone);
}

void KvEventIndex::clear(size_t worker) {
  {
    std::lock_guard lock(mu_);
    if (worker < workers_.size()) workers_[worker] = WorkerBlocks{};
  }
  index_.clear(worker);
}

size_t KvEventIndex::n_worker_blocks(size_t worker) const {
  std::lock_guard lock(mu_);
  return worker < workers_.size() ? workers_[worker].router_hash_of.size() : 0;
}

}  // namespace ds::cluster
