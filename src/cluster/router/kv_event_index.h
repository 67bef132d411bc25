// KvEventIndex: a worker's KV events applied to the router's PrefixIndex, so the index holds what
// the worker's cache really holds (evictions included) instead of what the router sent it.
//
// The worker's block hashes are chained under a per-process random seed (kvcache/prefix_hash.h),
// which the router does not know and should not: they are opaque keys here. Each BlockStored run
// carries its blocks' token ids and its parent's hash, so the router hashes every block itself with
// chain_block_hash() (the parent's router hash, else kRootBlockHash at position 0), exactly as it
// hashes a request's prompt, and keeps worker hash -> router hash to apply BlockRemoved later.
// Several worker blocks can carry one router hash (the same tokens under two cache salts): the
// router hash leaves the index when the last of them is removed.
//
// A stored run whose parent the router never saw (it subscribed late or missed a batch) cannot be
// placed in the chain and is dropped (counted); so is a run with another block size than the
// router's. Thread-safe (one mutex; PrefixIndex has its own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "cluster/router/kv_event_decoding.h"
#include "cluster/router/prefix_index.h"

namespace ds::cluster {

struct KvEventApplyCounts {
  size_t blocks_stored = 0;   // new worker blocks (duplicates of known ones not counted)
  size_t blocks_removed = 0;  // known worker blocks removed
  size_t blocks_dropped = 0;  // stored blocks that could not be placed (unknown parent, block size)
  size_t cleared = 0;         // AllBlocksCleared events
};

class KvEventIndex {
 public:
  KvEventIndex(PrefixIndex& index, int block_size_tokens);

  KvEventApplyCounts apply(size_t worker, const WorkerKvEventBatch& batch);
  // The worker's cache is gone or unknown (restart, missed batches): forget its blocks, here and in
  // the PrefixIndex.
  void clear(size_t worker);
  size_t n_worker_blocks(size_t worker) const;

 private:
  struct WorkerBlocks {
    std::unordered_map<uint64_t, uint64_t> router_hash_of;  // worker hash -> router hash
    std::unordered_map<uint64_t, uint32_t> refs;            // router hash -> worker blocks carrying it
  };
  void store(size_t worker, WorkerBlocks& w, const WorkerKvEvent& ev, KvEventApplyCounts& counts);
  void remove(size_t worker, WorkerBlocks& w, const WorkerKvEvent& ev, KvEventApplyCounts& counts);

  PrefixIndex& index_;
  const int block_size_tokens_;
  mutable std::mutex mu_;
  std::vector<WorkerBlocks> workers_;  // guarded by mu_
};

}  // namespace ds::cluster
