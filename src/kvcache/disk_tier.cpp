#include "kvcache/disk_tier.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "base/unique_fd.h"
#include "kvcache/tier_entry_format.h"

namespace ds {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Status io_error(const std::string& path, const char* what) {
  return Status(ErrorCode::io_error,
                fmt::format("kv disk tier: {} {}: {}", what, path, std::strerror(errno)));
}

// "0123456789abcdef.kv" -> key; false for any other name (temp files, strangers).
bool parse_entry_name(const char* name, uint64_t& key) {
  if (std::strlen(name) != 19 || std::strcmp(name + 16, ".kv") != 0) return false;
  key = 0;
  for (int i = 0; i < 16; ++i) {
    const char c = name[i];
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) return false;
    key = key << 4 | static_cast<uint64_t>(digit);
  }
  return true;
}

// The expiry and scope in an entry file's first bytes.
Result<TierEntryMeta> peek_file(const std::string& path) {
  std::array<std::byte, kTierEntryPeekBytes> head{};
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return io_error(path, "open");
  const ssize_t got = ::pread(fd.get(), head.data(), head.size(), 0);
  if (got < 0) return io_error(path, "read");
  return peek_tier_entry(std::span(head.data(), static_cast<size_t>(got)));
}

Status write_all(int fd, const std::byte* data, size_t n, const std::string& path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t put = ::pwrite(fd, data + done, n - done, static_cast<off_t>(done));
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return io_error(path, "write");
    done += static_cast<size_t>(put);
  }
  return ok_status();
}

}  // namespace

Result<std::unique_ptr<DiskTier>> DiskTier::open(const DiskTierConfig& cfg) {
  if (cfg.capacity_bytes <= 0) {
    return Status(ErrorCode::invalid_argument, "kv disk tier: capacity must be positive");
  }
  if (::mkdir(cfg.dir.c_str(), 0700) != 0 && errno != EEXIST) return io_error(cfg.dir, "mkdir");
  std::string folder = fmt::format("{}/{:016x}", cfg.dir, cfg.namespace_id);
  if (::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST) return io_error(folder, "mkdir");
  return std::unique_ptr<DiskTier>(new DiskTier(cfg, std::move(folder)));
}

DiskTier::DiskTier(const DiskTierConfig& cfg, std::string folder)
    : cfg_(cfg), folder_(std::move(folder)), scan_thread_([this] { scan(); }) {}

DiskTier::~DiskTier() {
  stop_ = true;
  if (scan_thread_.joinable()) scan_thread_.join();
}

int64_t DiskTier::now_unix_s() const {
  if (cfg_.now_unix_s) return cfg_.now_unix_s();
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool DiskTier::expire_locked(uint64_t key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return false;
  const int64_t expires = it->second.expires_at_unix_s;
  if (expires == 0 || now_unix_s() < expires) return false;
  index_erase_locked(key);
  ::unlink(entry_path(key).c_str());
  ++stats_.n_expired;
  return true;
}

std::string DiskTier::entry_path(uint64_t key) const { return fmt::format("{}/{:016x}.kv", folder_, key); }

void DiskTier::scan() {
  if (cfg_.before_scan) cfg_.before_scan();
  struct Found {
    int64_t mtime_ns;
    uint64_t key;
    int64_t bytes;
    int64_t expires_at_unix_s;
  };
  const int64_t now_s = now_unix_s();
  int64_t n_expired = 0;
  std::vector<Found> found;
  if (DIR* dir = ::opendir(folder_.c_str()); dir != nullptr) {
    while (const dirent* e = ::readdir(dir)) {
      if (stop_) break;
      const std::string path = folder_ + "/" + e->d_name;
      uint64_t key = 0;
      if (!parse_entry_name(e->d_name, key)) {
        // A temp file of a write that never finished (the writer was killed): never an entry.
        if (std::strncmp(e->d_name, ".tmp-", 5) == 0) ::unlink(path.c_str());
        continue;
      }
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0) continue;
      // The header's expiry: an expired entry is reclaimed now (a corrupt header is left to the
      // read that finds it, which deletes it).
      int64_t expires = 0;
      if (Result<TierEntryMeta> meta = peek_file(path); meta.ok()) expires = meta->expires_at_unix_s;
      if (expires != 0 && now_s >= expires) {
        ::unlink(path.c_str());
        ++n_expired;
        continue;
      }
      found.push_back(
          {int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec, key, st.st_size, expires});
    }
    ::closedir(dir);
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime_ns < b.mtime_ns; });
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Entries found are older than anything written or looked up since start-up: they go in
    // front of those (least recently used first), oldest first.
    const auto first_since_start = lru_.begin();
    for (const Found& f : found) {
      if (index_.contains(f.key)) continue;  // written or looked up since start-up
      Item item{f.bytes, f.expires_at_unix_s, lru_.insert(first_since_start, f.key)};
      index_.emplace(f.key, item);
      stats_.bytes_stored += f.bytes;
    }
    stats_.n_expired += n_expired;
    evict_locked();
    scan_done_ = true;
  }
  scan_cv_.notify_all();
}

void DiskTier::wait_for_scan() {
  std::unique_lock<std::mutex> lock(mu_);
  scan_cv_.wait(lock, [this] { return scan_done_; });
}

void DiskTier::index_insert_locked(uint64_t key, int64_t bytes, int64_t expires_at_unix_s) {
  index_erase_locked(key);
  Item item{bytes, expires_at_unix_s, lru_.insert(lru_.end(), key)};
  index_.emplace(key, item);
  stats_.bytes_stored += bytes;
  evict_locked();
}

void DiskTier::index_erase_locked(uint64_t key) {
  const auto it = index_.find(key);
  if (it == index_.end()) return;
  stats_.bytes_stored -= it->second.bytes;
  lru_.erase(it->second.lru_pos);
  index_.erase(it);
}

void DiskTier::evict_locked() {
  while (stats_.bytes_stored > cfg_.capacity_bytes && !lru_.empty()) {
    const uint64_t victim = lru_.front();
    index_erase_locked(victim);
    ::unlink(entry_path(victim).c_str());
    ++stats_.n_evictions;
  }
}

bool DiskTier::indexed_locked(uint64_t key) {
  if (index_.contains(key)) return true;
  if (scan_done_) return false;
  const std::string path = entry_path(key);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  // A corrupt header is left to the read that finds it (which deletes it), as in the scan.
  int64_t expires = 0;
  if (Result<TierEntryMeta> meta = peek_file(path); meta.ok()) expires = meta->expires_at_unix_s;
  if (expires != 0 && now_unix_s() >= expires) return false;  // the scan deletes it
  index_insert_locked(key, st.st_size, expires);
  return true;
}

int64_t DiskTier::count_prefix(std::span<const uint64_t> keys) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t n = 0;
  while (n < static_cast<int64_t>(keys.size())) {
    const uint64_t key = keys[static_cast<size_t>(n)];
    if (!indexed_locked(key) || expire_locked(key)) break;
    ++n;
  }
  return n;
}

bool DiskTier::contains(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  return indexed_locked(key) && !expire_locked(key);
}

void DiskTier::drop_corrupt(uint64_t key) {
  std::lock_guard<std::mutex> lock(mu_);
  index_erase_locked(key);
  ::unlink(entry_path(key).c_str());
  ++stats_.n_corrupt;
}

Result<TierEntry> DiskTier::read(uint64_t key) {
  const int64_t start_ns = now_ns();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!indexed_locked(key) || expire_locked(key)) {
      ++stats_.n_misses;
      return Status(ErrorCode::kvcache_tier_miss, fmt::format("kv disk tier: no entry {:016x}", key));
    }
    lru_.splice(lru_.end(), lru_, index_.at(key).lru_pos);  // most recently used
  }
  const std::string path = entry_path(key);
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    // Evicted (or deleted by another server sharing the folder) since the lookup: a miss.
    std::lock_guard<std::mutex> lock(mu_);
    index_erase_locked(key);
    ++stats_.n_misses;
    return Status(ErrorCode::kvcache_tier_miss, fmt::format("kv disk tier: {} is gone", path));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return io_error(path, "stat");
  std::vector<std::byte> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::pread(fd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return io_error(path, "read");
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  bytes.resize(done);
  Result<TierEntry> entry = decode_tier_entry(cfg_.namespace_id, key, bytes);
  if (!entry.ok()) {
    drop_corrupt(key);
    return Status(entry.status().code(), path + ": " + entry.status().message());
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (entry->expires_at_unix_s != 0 && now_unix_s() >= entry->expires_at_unix_s) {
    // Expired between the lookup and the read (or the index was wrong): never served.
    index_erase_locked(key);
    ::unlink(path.c_str());
    ++stats_.n_expired;
    ++stats_.n_misses;
    return Status(ErrorCode::kvcache_tier_miss, fmt::format("kv disk tier: {} expired", path));
  }
  ++stats_.n_hits;
  stats_.bytes_read += static_cast<int64_t>(done);
  stats_.read_ns_total += now_ns() - start_ns;
  stats_.read_latency.add(now_ns() - start_ns);
  return entry;
}

Status DiskTier::write(const TierEntry& entry) {
  const int64_t start_ns = now_ns();
  const std::vector<std::byte> bytes = encode_tier_entry(cfg_.namespace_id, entry);
  const std::string tmp =
      fmt::format("{}/.tmp-{:016x}-{}-{}", folder_, entry.key, ::getpid(), tmp_counter_++);
  Status written;
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    written = fd.valid() ? write_all(fd.get(), bytes.data(), bytes.size(), tmp) : io_error(tmp, "create");
  }
  if (written.ok() && ::rename(tmp.c_str(), entry_path(entry.key).c_str()) != 0)
    written = io_error(tmp, "rename");
  std::lock_guard<std::mutex> lock(mu_);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    ++stats_.n_errors;
    return written;
  }
  index_insert_locked(entry.key, static_cast<int64_t>(bytes.size()), entry.expires_at_unix_s);
  ++stats_.n_writes;
  stats_.bytes_written += static_cast<int64_t>(bytes.size());
  stats_.write_ns_total += now_ns() - start_ns;
  stats_.write_latency.add(now_ns() - start_ns);
  return ok_status();
}

Result<int64_t> DiskTier::remove_matching(const TierScopeFilter& filter) {
  // The folder, not the index: servers sharing it may have written entries this one never saw.
  DIR* dir = ::opendir(folder_.c_str());
  if (dir == nullptr) return io_error(folder_, "opendir");
  std::vector<uint64_t> removed;
  while (const dirent* e = ::readdir(dir)) {
    uint64_t key = 0;
    if (!parse_entry_name(e->d_name, key)) continue;
    const std::string path = folder_ + "/" + e->d_name;
    const Result<TierEntryMeta> meta = peek_file(path);
    if (!meta.ok()) continue;  // gone meanwhile, or corrupt: the read that finds it deletes it
    if (filter.matches(meta->scope) && ::unlink(path.c_str()) == 0) removed.push_back(key);
  }
  ::closedir(dir);
  std::lock_guard<std::mutex> lock(mu_);
  for (const uint64_t key : removed) index_erase_locked(key);
  stats_.n_removed += static_cast<int64_t>(removed.size());
  return static_cast<int64_t>(removed.size());
}

TierStats DiskTier::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  TierStats s = stats_;
  s.n_entries = static_cast<int64_t>(index_.size());
  return s;
}

}  // namespace ds
