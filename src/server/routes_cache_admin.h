// The admin cache routes (docs/kvcache.md, Admin routes), registered as RouteAccess::admin: with
// ServerConfig::admin_api_keys they take only an admin key (a client key gets 403).
//   GET    /v1/cache/stats  the pool (blocks, cached, evictions, prefix hits, pins), every KV tier's
//                           counters, the tier write path and the KV event publisher
//   DELETE /v1/cache        body {"salt": S} | {"key_prefix": P} | both | {"all": true}: drops the
//                           matching cached prefixes from the pool (pin leases of matching requests
//                           end first; blocks in use are kept and counted). Tier entries are not
//                           deleted: they expire by their TTL (and the salt is part of their keys).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>

#include "base/status.h"
#include "engine/engine.h"
#include "http/route_table.h"

namespace ds::server {

struct CacheAdminRoutesConfig {
  Engine* engine = nullptr;  // required; must outlive the server
  // The KV event publisher's counters for the "kv_events" member; empty: no publisher.
  std::function<nlohmann::ordered_json()> kv_events_stats;
};

Status add_cache_admin_routes(RouteTable& router, const CacheAdminRoutesConfig& config);

}  // namespace ds::server
