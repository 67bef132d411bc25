#include "server/routes_cache_admin.h"

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace ds::server {

namespace {

using Json = nlohmann::ordered_json;

Status bad_field(std::string_view path, std::string_view message) {
  return Status(ErrorCode::recipe_bad_request, fmt::format("{}: {}", path, message));
}

Json tier_json(const std::string& name, const TierStats& t) {
  return Json{{"name", name},          {"entries", t.n_entries},     {"bytes_stored", t.bytes_stored},
              {"hits", t.n_hits},      {"misses", t.n_misses},       {"corrupt", t.n_corrupt},
              {"writes", t.n_writes},  {"evictions", t.n_evictions}, {"expired", t.n_expired},
              {"errors", t.n_errors},  {"bytes_read", t.bytes_read}, {"bytes_written", t.bytes_written},
              {"removed", t.n_removed}};
}

Json stats_json(const CacheAdminRoutesConfig& config) {
  const EngineStats s = config.engine->stats();
  Json pool = {{"block_size_tokens", config.engine->kv_cache_config().block_size_tokens},
               {"blocks_total", s.kv_blocks_total},
               {"blocks_free", s.kv_blocks_free},
               {"blocks_cached", s.kv_blocks_cached},
               {"evictions", s.kv_evictions},
               {"prefix_query_tokens", s.prefix_queries_tokens},
               {"prefix_hit_tokens", s.prefix_hit_tokens},
               {"pinned_blocks", s.kv_pinned_blocks},
               {"pin_leases", s.kv_pin_leases},
               {"pins_refused", s.kv_pins_refused},
               {"pin_quota_blocks", s.kv_pin_quota_blocks}};
  Json tiers = Json::array();
  for (const auto& [name, t] : config.engine->kv_tier_stats()) tiers.push_back(tier_json(name, t));
  Json out = {{"object", "cache.stats"},
              {"pool", std::move(pool)},
              {"tiers", std::move(tiers)},
              {"tier_path",
               {{"restores", s.kv_tier_restores},
                {"restored_tokens", s.kv_tier_restored_tokens},
                {"blocks_written", s.kv_tier_blocks_written},
                {"write_jobs", s.kv_tier_write_jobs},
                {"write_jobs_dropped", s.kv_tier_write_jobs_dropped},
                {"write_cpu_seconds", static_cast<double>(s.kv_tier_write_cpu_ns) * 1e-9}}}};
  if (config.kv_events_stats) out["kv_events"] = config.kv_events_stats();
  return out;
}

// {"salt": S, "key_prefix": P, "all": true}: at least one, "all" alone, no other field.
Result<CacheClearFilter> parse_clear_filter(const std::string& body) {
  const Json j = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return bad_field("body", "expected a JSON object");
  CacheClearFilter filter;
  bool all = false;
  for (const auto& [key, value] : j.items()) {
    if (key == "salt") {
      if (!value.is_string()) return bad_field("salt", "expected string");
      filter.salt = value.get<std::string>();
    } else if (key == "key_prefix") {
      if (!value.is_string() || value.get<std::string>().empty())
        return bad_field("key_prefix", "expected a non-empty string");
      filter.key_prefix = value.get<std::string>();
    } else if (key == "all") {
      if (!value.is_boolean()) return bad_field("all", "expected boolean");
      all = value.get<bool>();
    } else {
      return bad_field(key, "unknown field (expected salt, key_prefix or all)");
    }
  }
  const bool scoped = filter.salt.has_value() || filter.key_prefix.has_value();
  if (all && scoped) return bad_field("all", "cannot be combined with salt or key_prefix");
  if (!all && !scoped) return bad_field("body", "name what to delete: salt, key_prefix or \"all\": true");
  return filter;
}

}  // namespace

Status add_cache_admin_routes(RouteTable& router, const CacheAdminRoutesConfig& config) {
  if (config.engine == nullptr)
    return Status(ErrorCode::invalid_argument, "cache admin routes need an engine");
  auto shared = std::make_shared<const CacheAdminRoutesConfig>(config);
  const RouteOptions admin{ErrorStyle::openai, RouteAccess::admin};
  DS_TRY(router.add("GET", "/v1/cache/stats", admin,
                    [shared](ServerRequest, std::shared_ptr<ResponseChannel> out) {
                      out->send_json(200, stats_json(*shared).dump());
                    }));
  return router.add("DELETE", "/v1/cache", admin,
                    [shared](ServerRequest req, std::shared_ptr<ResponseChannel> out) {
                      Result<CacheClearFilter> filter = parse_clear_filter(req.body);
                      if (!filter.ok()) return out->send_error(filter.status());
                      Result<CacheClearResult> r = shared->engine->clear_cache(*filter);
                      if (!r.ok()) return out->send_error(r.status());
                      out->send_json(200, Json{{"object", "cache.deletion"},
                                               {"blocks_removed", r->blocks_removed},
                                               {"blocks_in_use", r->blocks_in_use},
                                               {"pin_leases_released", r->pin_leases_released},
                                               {"tier_entries_removed", r->tier_entries_removed}}
                                              .dump());
                    });
}

}  // namespace ds::server
