// RedisTier: prefix KV blocks in Redis, shared by replicas and machines (`--kv-redis URL`).
//
// One binary value per entry (tier_entry_format's bytes) under "dskv:<namespace hex>:<key hex>",
// written with SET ... EX (the entry's own TTL, else ttl_s; Redis expires and evicts; a server never serves
// what Redis no longer holds). count_prefix() asks EXISTS for every key in one pipelined round trip.
//
// Redis down or slow never fails or stalls a request: every call has a short timeout
// (lookup_timeout_ms on the engine thread's lookups, io_timeout_ms on the writer and restore
// threads); a failed call marks the tier down for retry_after_ms, during which every call returns
// at once (count 0, kvcache_tier_unavailable), then the next call reconnects.
// Two connections (lookups; reads and writes), each behind its own mutex: hiredis contexts are
// not thread-safe.
#pragma once

#include <hiredis/hiredis.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "kvcache/kv_tier.h"

namespace ds {

struct RedisTierConfig {
  std::string url;  // redis://HOST:PORT or unix:///PATH
  uint64_t namespace_id = 0;
  int64_t ttl_s = 86400;
  int lookup_timeout_ms = 20;
  int io_timeout_ms = 200;
  int retry_after_ms = 1000;
};

class RedisTier final : public KvTier {
 public:
  // invalid_argument for a URL that is neither form. Connects lazily: a server starts with Redis down.
  static Result<std::unique_ptr<RedisTier>> open(const RedisTierConfig& cfg);
  ~RedisTier() override;

  const std::string& name() const override { return name_; }
  int64_t count_prefix(std::span<const uint64_t> keys) override;
  bool contains(uint64_t key) override;
  Result<TierEntry> read(uint64_t key) override;
  Status write(const TierEntry& entry) override;
  // Pipelined: one EXISTS per key, one SET per entry, each batch in one round trip.
  std::vector<bool> contains_each(std::span<const uint64_t> keys) override;
  Status write_batch(std::span<const TierEntry* const> entries) override;
  // SCAN over this namespace's keys, GETRANGE of each entry's head, DEL of the matching ones.
  Result<int64_t> remove_matching(const TierScopeFilter& filter) override;
  TierStats stats() const override;

  std::string redis_key(uint64_t key) const;

 private:
  struct Connection {
    std::mutex mu;
    redisContext* ctx = nullptr;  // null: not connected
    int timeout_ms = 0;
  };
  RedisTier(const RedisTierConfig& cfg, std::string host, int port, std::string unix_path);
  // Connected context or null (down, or the connect failed: then marked down). Lock held.
  redisContext* connect_locked(Connection& c);
  void fail_locked(Connection& c);
  bool is_down() const;
  void count_error();

  RedisTierConfig cfg_;
  std::string host_;
  int port_ = 0;
  std::string unix_path_;
  std::string name_ = "redis";
  Connection lookup_, io_;
  std::atomic<int64_t> down_until_ns_{0};
  mutable std::mutex stats_mu_;
  TierStats stats_;
};

}  // namespace ds
