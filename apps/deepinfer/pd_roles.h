// `deepinfer serve --role prefill|decode|both` (docs/pd.md): the flags, the KV tier the prefill role
// adds to the engine (the outbox its tier writer fills; the decode role takes the pages straight into
// its pool), and the role's service, its route and its metrics once the engine exists.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "cluster/pd/decode_service.h"
#include "cluster/pd/pd_identity.h"
#include "cluster/pd/pool_lender.h"
#include "cluster/pd/prefill_service.h"
#include "cluster/pd/transit_tier.h"
#include "engine/engine.h"
#include "http/metrics_registry.h"
#include "http/route_table.h"
#include "server/routes_generate.h"
#include "transport/shared_pages.h"

namespace ds::cli {

struct PdOptions {
  std::string role = "both";
  std::string secret_file;
  std::string transfer_host = "127.0.0.1";
  int64_t lease_timeout_ms = 30'000;
  int64_t transit_mib = 1024;  // outbox / landing tier capacity, and the decode side's landing region
  std::string transport;       // UCX transports (UCX_TLS syntax); empty: UCX's choice / UCX_TLS
  bool stream_puts = true;     // prefill role: put blocks as the prefill's chunks complete them
  bool shared_memory = true;   // the KV pool in a segment same-host peers map (decode) / use it (prefill)
  double lease_pool_fraction = 0.5;  // decode role: the pool's share transfers may lease at once
  int transfer_slots = 1;            // decode role: UCX transfer slots made at start
  std::string prefill_api_key;       // decode role: the key its calls to the prefill servers carry
  // Decode role: the prefill servers it may call (the router's --prefill URLs). A request naming
  // any other server in its prefill-peer header is prefilled here: a request never chooses where
  // this server connects to.
  std::vector<std::string> prefill_peers;
  // Prefill role: the addresses of the decode servers' UCX listeners it may connect to.
  std::vector<std::string> decode_peers;
};

void add_pd_options(CLI::App* sub, PdOptions& o);

class PdRole {
 public:
  // Before Engine::create: validates the flags and adds the role's tier to `engine_config`
  // (invalid_argument naming the flag). Role both: nothing to do (a null-free object that attaches nothing).
  static Result<std::unique_ptr<PdRole>> configure(const PdOptions& o, const std::string& model_dir,
                                                   EngineConfig& engine_config);
  // After Engine::create: starts the role's service, registers its route and metrics and, for the
  // decode role, fills `generate.kv_import`.
  Status attach(Engine& engine, const ModelRunner& model, server::RouteTable& routes,
                server::GenerateRoutesConfig& generate, server::MetricsRegistry& registry, const Logger* log);
  pd::PdRole role() const { return role_; }
  // Transfers in flight end (bounded) before the engine goes.
  void stop();

 private:
  PdRole() = default;
  pd::PdRole role_ = pd::PdRole::both;
  PdOptions options_;
  std::shared_ptr<pd::PdIdentity> identity_;
  std::shared_ptr<uint64_t> namespace_id_;  // filled by the engine's tier open callback
  std::shared_ptr<pd::TransitTier> tier_;
  std::shared_ptr<pd::PoolIndex> pool_;  // decode role: the engine's KV events keep it
  // --kv-disk-dir / --kv-redis tiers under the transit tier (filled by the tier open callback).
  std::shared_ptr<std::vector<std::shared_ptr<KvTier>>> local_tiers_;
  std::unique_ptr<pd::PrefillService> prefill_;
  std::shared_ptr<transport::SharedPageMemory> shared_pages_;  // decode role: the pool's memory
  std::shared_ptr<pd::PoolLender> lender_;  // decode role: the engine's pool, lent to the transfers
  std::unique_ptr<pd::DecodeService> decode_;
};

}  // namespace ds::cli
