#include "kv_tier_options.h"

#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "kvcache/disk_tier.h"
#include "kvcache/redis_tier.h"
#include "kvcache/tier_key.h"
#include "weights/checkpoint.h"

namespace ds::cli {

void add_kv_tier_options(CLI::App* sub, KvTierOptions& o) {
  auto* g = sub->add_option_group("KV tiers", "Prefix KV kept below the pool (docs/kvcache.md, Tiers)");
  g->add_option("--kv-disk-dir", o.disk_dir, "Folder of the SSD tier (created; entries survive restarts)");
  g->add_option("--kv-disk-gib", o.disk_gib, "Capacity of the SSD tier (LRU beyond it)")
      ->capture_default_str();
  g->add_option("--kv-redis", o.redis_url, "Redis tier shared by servers: redis://HOST:PORT or unix:///PATH");
  g->add_option("--kv-redis-ttl-s", o.redis_ttl_s, "EXPIRE of the Redis entries")->capture_default_str();
  g->add_option(
      "--kv-ttl", o.ttl,
      "TTL per traffic class of the tier entries, e.g. chat=7d,agent=3d,default=1d (units s m h d)");
  g->add_option("--kv-secret-file", o.secret_file,
                "Secret that keys the tier entries (created on first use; default DIR/secret). Servers "
                "sharing tiers share it");
  g->add_option("--kv-tier-writes", o.writes, "Write completed prefix blocks to the tiers")
      ->capture_default_str();
  g->add_option("--kv-write-every-tokens", o.write_every_tokens,
                "A long output's blocks go to the tiers every this many tokens (0: only at its end)")
      ->capture_default_str();
}

Result<uint64_t> checkpoint_fingerprint(const std::string& model_dir) {
  XXH3_state_t* state = XXH3_createState();
  const std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> owned(state, XXH3_freeState);
  XXH3_64bits_reset(state);
  std::ifstream config(model_dir + "/config.json", std::ios::binary);
  if (!config) return Status(ErrorCode::io_error, model_dir + "/config.json: cannot read");
  const std::string config_bytes((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
  XXH3_64bits_update(state, config_bytes.data(), config_bytes.size());
  DS_ASSIGN_OR_RETURN(const Checkpoint ckpt, Checkpoint::open(model_dir));
  for (const TensorEntry* t : ckpt.tensors()) {
    XXH3_64bits_update(state, t->name.data(), t->name.size() + 1);
    XXH3_64bits_update(state, &t->dtype, sizeof(t->dtype));
    XXH3_64bits_update(state, t->shape.dims.data(), sizeof(int64_t) * static_cast<size_t>(t->shape.rank));
    const uint64_t n = t->nbytes;
    XXH3_64bits_update(state, &n, sizeof(n));
    XXH3_64bits_update(state, t->data, std::min<size_t>(t->nbytes, 4096));
  }
  return XXH3_64bits_digest(state);
}

Status configure_kv_tiers(const KvTierOptions& o, const std::string& model_dir, KvTierConfig& cfg) {
  if (o.disk_dir.empty() && o.redis_url.empty()) return ok_status();
  if (!o.disk_dir.empty() && !(o.disk_gib > 0))
    return Status(ErrorCode::invalid_argument, "--kv-disk-gib must be > 0");
  if (o.disk_dir.empty() && o.secret_file.empty()) {
    return Status(ErrorCode::invalid_argument,
                  "--kv-redis without --kv-disk-dir needs --kv-secret-file (the same file on every server)");
  }
  if (!o.redis_url.empty() && o.redis_ttl_s < 1)
    return Status(ErrorCode::invalid_argument, "--kv-redis-ttl-s must be >= 1");
  // Checked now, so a bad URL is a start-up error naming the flag.
  if (!o.redis_url.empty()) DS_TRY(RedisTier::open({.url = o.redis_url}).status());
  if (!o.ttl.empty()) {
    DS_ASSIGN_OR_RETURN(cfg.ttl, TierTtlPolicy::parse(o.ttl));
  }
  DS_ASSIGN_OR_RETURN(cfg.model_fingerprint, checkpoint_fingerprint(model_dir));
  if (!o.disk_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(o.disk_dir, ec);
    if (ec) return Status(ErrorCode::io_error, "--kv-disk-dir " + o.disk_dir + ": " + ec.message());
  }
  const std::string secret_file = o.secret_file.empty() ? o.disk_dir + "/secret" : o.secret_file;
  DS_ASSIGN_OR_RETURN(cfg.secret, load_or_create_tier_secret(secret_file));
  cfg.writes = o.writes;
  if (o.write_every_tokens < 0)
    return Status(ErrorCode::invalid_argument, "--kv-write-every-tokens must be >= 0");
  cfg.write_every_tokens = o.write_every_tokens;
  const auto capacity = static_cast<int64_t>(o.disk_gib * static_cast<double>(int64_t{1} << 30));
  cfg.open = [o, capacity](uint64_t namespace_id) -> Result<std::vector<std::shared_ptr<KvTier>>> {
    std::vector<std::shared_ptr<KvTier>> tiers;  // read in this order: the local SSD first
    if (!o.disk_dir.empty()) {
      DS_ASSIGN_OR_RETURN(std::unique_ptr<DiskTier> disk,
                          DiskTier::open({o.disk_dir, capacity, namespace_id, {}, {}}));
      tiers.push_back(std::move(disk));
    }
    if (!o.redis_url.empty()) {
      DS_ASSIGN_OR_RETURN(
          std::unique_ptr<RedisTier> redis,
          RedisTier::open({.url = o.redis_url, .namespace_id = namespace_id, .ttl_s = o.redis_ttl_s}));
      tiers.push_back(std::move(redis));
    }
    return tiers;
  };
  return ok_status();
}

}  // namespace ds::cli
