// `deepinfer serve` KV tier flags (docs/kvcache.md, Tiers): --kv-disk-dir, --kv-disk-gib,
// --kv-redis, --kv-redis-ttl-s, --kv-ttl, --kv-secret-file, --kv-tier-writes, --kv-write-every-tokens;
// and the checkpoint fingerprint
// that keys the tiers.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/engine_config.h"

namespace ds::cli {

struct KvTierOptions {
  std::string disk_dir;  // "" = no SSD tier
  double disk_gib = 16.0;
  std::string redis_url;  // "" = no Redis tier
  int64_t redis_ttl_s = 86400;
  std::string ttl;          // --kv-ttl chat=7d,agent=3d,default=1d ("" = default 1d for every class)
  std::string secret_file;  // "" = DIR/secret (required with Redis alone)
  bool writes = true;
  int64_t write_every_tokens = 1024;
};

void add_kv_tier_options(CLI::App* sub, KvTierOptions& o);

// XXH3 over config.json's bytes and the tensor table (name, dtype, shape, byte length and the
// hash of each tensor's first 4 KiB): a fine-tune with the same shapes is another model.
Result<uint64_t> checkpoint_fingerprint(const std::string& model_dir);

// Fills cfg from the flags (nothing when no tier is asked for). invalid_argument naming the flag.
Status configure_kv_tiers(const KvTierOptions& o, const std::string& model_dir, KvTierConfig& cfg);

}  // namespace ds::cli
