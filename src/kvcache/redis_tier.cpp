#include "kvcache/redis_tier.h"

#include <fmt/format.h>

#include <vector>

#include "kvcache/tier_entry_format.h"

namespace ds {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

timeval to_timeval(int ms) { return timeval{ms / 1000, (ms % 1000) * 1000}; }

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

Status unavailable(const std::string& what) {
  return Status(ErrorCode::kvcache_tier_unavailable, "kv redis tier: " + what);
}

}  // namespace

Result<std::unique_ptr<RedisTier>> RedisTier::open(const RedisTierConfig& cfg) {
  const std::string& url = cfg.url;
  if (url.rfind("unix://", 0) == 0 && url.size() > 7) {
    return std::unique_ptr<RedisTier>(new RedisTier(cfg, "", 0, url.substr(7)));
  }
  if (url.rfind("redis://", 0) == 0) {
    const std::string rest = url.substr(8);
    const size_t colon = rest.rfind(':');
    const std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
    int port = 6379;
    if (colon != std::string::npos) {
      try {
        port = std::stoi(rest.substr(colon + 1));
      } catch (const std::exception&) {
        port = -1;
      }
    }
    if (!host.empty() && port > 0 && port < 65536) {
      return std::unique_ptr<RedisTier>(new RedisTier(cfg, host, port, ""));
    }
  }
  return Status(ErrorCode::invalid_argument,
                "--kv-redis " + url + ": expected redis://HOST:PORT or unix:///PATH");
}

RedisTier::RedisTier(const RedisTierConfig& cfg, std::string host, int port, std::string unix_path)
    : cfg_(cfg), host_(std::move(host)), port_(port), unix_path_(std::move(unix_path)) {
  lookup_.timeout_ms = cfg.lookup_timeout_ms;
  io_.timeout_ms = cfg.io_timeout_ms;
}

RedisTier::~RedisTier() {
  for (Connection* c : {&lookup_, &io_}) {
    if (c->ctx != nullptr) redisFree(c->ctx);
  }
}

std::string RedisTier::redis_key(uint64_t key) const {
  return fmt::format("dskv:{:016x}:{:016x}", cfg_.namespace_id, key);
}

bool RedisTier::is_down() const { return now_ns() < down_until_ns_.load(); }

void RedisTier::count_error() {
  std::lock_guard<std::mutex> lock(stats_mu_);
  ++stats_.n_errors;
}

void RedisTier::fail_locked(Connection& c) {
  if (c.ctx != nullptr) redisFree(c.ctx);
  c.ctx = nullptr;
  down_until_ns_ = now_ns() + int64_t{cfg_.retry_after_ms} * 1'000'000;
  count_error();
}

redisContext* RedisTier::connect_locked(Connection& c) {
  if (c.ctx != nullptr) return c.ctx;
  if (is_down()) return nullptr;
  const timeval timeout = to_timeval(c.timeout_ms);
  c.ctx = unix_path_.empty() ? redisConnectWithTimeout(host_.c_str(), port_, timeout)
                             : redisConnectUnixWithTimeout(unix_path_.c_str(), timeout);
  if (c.ctx == nullptr || c.ctx->err != 0 || redisSetTimeout(c.ctx, timeout) != REDIS_OK) {
    fail_locked(c);
    return nullptr;
  }
  return c.ctx;
}

std::vector<bool> RedisTier::contains_each(std::span<const uint64_t> keys) {
  std::vector<bool> held(keys.size(), false);
  if (keys.empty()) return held;
  std::lock_guard<std::mutex> lock(lookup_.mu);
  redisContext* ctx = connect_locked(lookup_);
  if (ctx == nullptr) return held;
  std::vector<std::string> names;
  names.reserve(keys.size());
  for (const uint64_t key : keys) {
    names.push_back(redis_key(key));
    redisAppendCommand(ctx, "EXISTS %b", names.back().data(), names.back().size());
  }
  for (size_t i = 0; i < keys.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx, &raw) != REDIS_OK) {
      fail_locked(lookup_);
      return std::vector<bool>(keys.size(), false);
    }
    const Reply reply(static_cast<redisReply*>(raw));
    held[i] = reply->type == REDIS_REPLY_INTEGER && reply->integer == 1;
  }
  return held;
}

int64_t RedisTier::count_prefix(std::span<const uint64_t> keys) {
  const std::vector<bool> held = contains_each(keys);
  int64_t n = 0;
  while (n < static_cast<int64_t>(held.size()) && held[static_cast<size_t>(n)]) ++n;
  return n;
}

bool RedisTier::contains(uint64_t key) { return count_prefix(std::span(&key, 1)) == 1; }

Result<TierEntry> RedisTier::read(uint64_t key) {
  const int64_t start_ns = now_ns();
  std::vector<std::byte> bytes;
  {
    std::lock_guard<std::mutex> lock(io_.mu);
    redisContext* ctx = connect_locked(io_);
    if (ctx == nullptr) return unavailable("down; retried later");
    const std::string name = redis_key(key);
    Reply reply(static_cast<redisReply*>(redisCommand(ctx, "GET %b", name.data(), name.size())));
    if (!reply) {
      fail_locked(io_);
      return unavailable("GET failed");
    }
    if (reply->type == REDIS_REPLY_NIL) {
      std::lock_guard<std::mutex> stats_lock(stats_mu_);
      ++stats_.n_misses;
      return Status(ErrorCode::kvcache_tier_miss, "kv redis tier: no entry " + name);
    }
    if (reply->type != REDIS_REPLY_STRING) return unavailable("GET: unexpected reply");
    const auto* p = reinterpret_cast<const std::byte*>(reply->str);
    bytes.assign(p, p + reply->len);
  }
  Result<TierEntry> entry = decode_tier_entry(cfg_.namespace_id, key, bytes);
  if (!entry.ok()) {
    {
      std::lock_guard<std::mutex> lock(io_.mu);
      if (redisContext* ctx = connect_locked(io_)) {
        const std::string name = redis_key(key);
        Reply(static_cast<redisReply*>(redisCommand(ctx, "DEL %b", name.data(), name.size())));
      }
    }
    std::lock_guard<std::mutex> stats_lock(stats_mu_);
    ++stats_.n_corrupt;
    return entry.status();
  }
  std::lock_guard<std::mutex> stats_lock(stats_mu_);
  ++stats_.n_hits;
  stats_.bytes_read += static_cast<int64_t>(bytes.size());
  stats_.read_ns_total += now_ns() - start_ns;
  stats_.read_latency.add(now_ns() - start_ns);
  return entry;
}

Status RedisTier::write(const TierEntry& entry) {
  const TierEntry* one[] = {&entry};
  return write_batch(one);
}

Status RedisTier::write_batch(std::span<const TierEntry* const> entries) {
  const int64_t start_ns = now_ns();
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  Status first;
  int64_t n_written = 0, bytes_written = 0;
  {
    std::lock_guard<std::mutex> lock(io_.mu);
    redisContext* ctx = connect_locked(io_);
    if (ctx == nullptr) return unavailable("down; retried later");
    std::vector<size_t> sizes;  // of the entries sent, in order
    for (const TierEntry* entry : entries) {
      // The entry's own expiry (its traffic class's TTL) when it has one, else the tier's.
      int64_t ttl_s = cfg_.ttl_s;
      if (entry->expires_at_unix_s != 0) {
        if (entry->expires_at_unix_s <= now_s) continue;  // already expired: nothing to keep
        ttl_s = entry->expires_at_unix_s - now_s;
      }
      const std::vector<std::byte> bytes = encode_tier_entry(cfg_.namespace_id, *entry);
      const std::string name = redis_key(entry->key);
      const std::string ttl = std::to_string(ttl_s);
      redisAppendCommand(ctx, "SET %b %b EX %s", name.data(), name.size(), bytes.data(), bytes.size(),
                         ttl.c_str());
      sizes.push_back(bytes.size());
    }
    for (const size_t size : sizes) {
      void* raw = nullptr;
      if (redisGetReply(ctx, &raw) != REDIS_OK) {
        fail_locked(io_);
        return unavailable("SET failed");
      }
      const Reply reply(static_cast<redisReply*>(raw));
      if (reply->type == REDIS_REPLY_ERROR) {
        count_error();
        if (first.ok()) first = unavailable(std::string("SET: ") + reply->str);
        continue;
      }
      ++n_written;
      bytes_written += static_cast<int64_t>(size);
    }
  }
  const int64_t elapsed_ns = now_ns() - start_ns;
  std::lock_guard<std::mutex> stats_lock(stats_mu_);
  stats_.n_writes += n_written;
  stats_.bytes_written += bytes_written;
  stats_.write_ns_total += elapsed_ns;
  // One latency observation per entry stored: the batch's time split evenly over them.
  for (int64_t i = 0; i < n_written; ++i) stats_.write_latency.add(elapsed_ns / n_written);
  return first;
}

Result<int64_t> RedisTier::remove_matching(const TierScopeFilter& filter) {
  const std::string pattern = fmt::format("dskv:{:016x}:*", cfg_.namespace_id);
  const std::string head_end = std::to_string(kTierEntryPeekBytes - 1);
  int64_t n_removed = 0;
  std::string cursor = "0";
  do {
    // One SCAN page, then the heads of its keys pipelined, then the matching ones deleted; the
    // lock is held per page so reads and writes interleave with a long scan.
    std::lock_guard<std::mutex> lock(io_.mu);
    redisContext* ctx = connect_locked(io_);
    if (ctx == nullptr) return unavailable("down; retried later");
    Reply page(static_cast<redisReply*>(
        redisCommand(ctx, "SCAN %s MATCH %b COUNT 256", cursor.c_str(), pattern.data(), pattern.size())));
    if (!page || page->type != REDIS_REPLY_ARRAY || page->elements != 2 ||
        page->element[0]->type != REDIS_REPLY_STRING || page->element[1]->type != REDIS_REPLY_ARRAY) {
      if (!page) fail_locked(io_);
      return unavailable("SCAN failed");
    }
    cursor.assign(page->element[0]->str, page->element[0]->len);
    const redisReply* keys = page->element[1];
    for (size_t i = 0; i < keys->elements; ++i)
      redisAppendCommand(ctx, "GETRANGE %b 0 %s", keys->element[i]->str, keys->element[i]->len,
                         head_end.c_str());
    std::vector<size_t> matching;
    for (size_t i = 0; i < keys->elements; ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx, &raw) != REDIS_OK) {
        fail_locked(io_);
        return unavailable("GETRANGE failed");
      }
      const Reply head(static_cast<redisReply*>(raw));
      if (head->type != REDIS_REPLY_STRING || head->len == 0) continue;  // expired meanwhile
      const auto* p = reinterpret_cast<const std::byte*>(head->str);
      const Result<TierEntryMeta> meta = peek_tier_entry(std::span(p, head->len));
      if (meta.ok() && filter.matches(meta->scope)) matching.push_back(i);
    }
    for (const size_t i : matching)
      redisAppendCommand(ctx, "DEL %b", keys->element[i]->str, keys->element[i]->len);
    for (size_t k = 0; k < matching.size(); ++k) {
      void* raw = nullptr;
      if (redisGetReply(ctx, &raw) != REDIS_OK) {
        fail_locked(io_);
        return unavailable("DEL failed");
      }
      const Reply deleted(static_cast<redisReply*>(raw));
      if (deleted->type == REDIS_REPLY_INTEGER) n_removed += deleted->integer;
    }
  } while (cursor != "0");
  std::lock_guard<std::mutex> stats_lock(stats_mu_);
  stats_.n_removed += n_removed;
  return n_removed;
}

TierStats RedisTier::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

}  // namespace ds
