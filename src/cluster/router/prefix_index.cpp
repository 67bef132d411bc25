#include "cluster/router/prefix_index.h"

#include <xxhash.h>

#include <algorithm>

namespace ds::cluster {
namespace {

// splitmix64's finaliser: a cheap, well-mixed step for the chain.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t chain_block_hash(uint64_t prev_hash, std::span<const int32_t> block_ids) {
  uint64_t h = prev_hash;
  for (const int32_t id : block_ids) h = mix(h ^ static_cast<uint32_t>(id));
  return h;
}

uint64_t root_block_hash(std::optional<uint64_t> salt_tag) {
  return salt_tag ? mix(kRootBlockHash ^ mix(*salt_tag)) : kRootBlockHash;
}

uint64_t salt_tag_of(std::string_view salt) { return XXH3_64bits(salt.data(), salt.size()); }

std::vector<uint64_t> block_hashes(std::span<const int32_t> ids, int block_size_tokens, uint64_t root) {
  std::vector<uint64_t> out;
  if (block_size_tokens <= 0) return out;
  const size_t bs = static_cast<size_t>(block_size_tokens);
  out.reserve(ids.size() / bs);
  uint64_t h = root;
  for (size_t start = 0; start + bs <= ids.size(); start += bs) {
    h = chain_block_hash(h, ids.subspan(start, bs));
    out.push_back(h);
  }
  return out;
}

PrefixIndex::PrefixIndex(size_t max_blocks_per_worker) : max_blocks_per_worker_(max_blocks_per_worker) {}

PrefixIndex::WorkerBlocks& PrefixIndex::blocks_of(size_t worker) {
  if (worker >= workers_.size()) workers_.resize(worker + 1);
  return workers_[worker];
}

void PrefixIndex::record(size_t worker, std::span<const uint64_t> hashes) {
  std::lock_guard lock(mu_);
  WorkerBlocks& w = blocks_of(worker);
  for (uint64_t h : hashes) {
    if (auto it = w.where.find(h); it != w.where.end()) {
      w.lru.splice(w.lru.begin(), w.lru, it->second);
      continue;
    }
    w.lru.push_front(h);
    w.where.emplace(h, w.lru.begin());
  }
  while (w.lru.size() > max_blocks_per_worker_) {
    w.where.erase(w.lru.back());
    w.lru.pop_back();
  }
}

void PrefixIndex::remove(size_t worker, std::span<const uint64_t> hashes) {
  std::lock_guard lock(mu_);
  WorkerBlocks& w = blocks_of(worker);
  for (uint64_t h : hashes) {
    if (auto it = w.where.find(h); it != w.where.end()) {
      w.lru.erase(it->second);
      w.where.erase(it);
    }
  }
}

void PrefixIndex::clear(size_t worker) {
  std::lock_guard lock(mu_);
  WorkerBlocks& w = blocks_of(worker);
  w.lru.clear();
  w.where.clear();
}

std::vector<size_t> PrefixIndex::match(std::span<const uint64_t> hashes, size_t n_workers) const {
  std::vector<size_t> out(n_workers, 0);
  std::lock_guard lock(mu_);
  for (size_t w = 0; w < std::min(n_workers, workers_.size()); ++w) {
    const auto& where = workers_[w].where;
    size_t n = 0;
    while (n < hashes.size() && where.contains(hashes[n])) ++n;
    out[w] = n;
  }
  return out;
}

size_t PrefixIndex::n_blocks(size_t worker) const {
  std::lock_guard lock(mu_);
  return worker < workers_.size() ? workers_[worker].lru.size() : 0;
}

}  // namespace ds::cluster
