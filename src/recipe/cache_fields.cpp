#include "recipe/cache_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "recipe/request_error.h"

namespace ds::recipe {

namespace {

Status refuse_unknown_keys(const Json& obj, std::string_view path,
                           std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : obj.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end())
      return field_error(join_path(path, key), "unknown field");
  }
  return ok_status();
}

// A traffic class names a TTL in --kv-ttl (chat, agent, ...): short lower-case words.
bool is_class_name(std::string_view name) {
  if (name.empty() || name.size() > 32) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

}  // namespace

Status read_cache_object(const Json& body, CacheDirectives& out) {
  const Json* cache = find_field(body, "cache");
  if (cache == nullptr) return ok_status();
  if (!cache->is_object())
    return field_error("cache", fmt::format("expected object, got {}", json_type_name(*cache)));
  DS_TRY(refuse_unknown_keys(*cache, "cache", {"class", "ttl_s", "pin", "salt"}));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> cache_class, read_string(*cache, "class", "cache"));
  if (cache_class.has_value()) {
    if (!is_class_name(*cache_class))
      return field_error("cache.class", "must be 1 to 32 characters of a-z, 0-9, '_' or '-'");
    out.cache_class = *cache_class;
  }
  DS_ASSIGN_OR_RETURN(std::optional<int64_t> ttl_s, read_integer(*cache, "ttl_s", "cache"));
  if (ttl_s.has_value()) {
    if (*ttl_s < 1 || *ttl_s > kMaxCacheTtlS)
      return field_error("cache.ttl_s", fmt::format("must be in [1, {}] seconds", kMaxCacheTtlS));
    out.ttl_s = ttl_s;
  }
  DS_ASSIGN_OR_RETURN(std::optional<bool> pin, read_bool(*cache, "pin", "cache"));
  out.pin = pin.value_or(false);
  DS_ASSIGN_OR_RETURN(std::optional<std::string> salt, read_string(*cache, "salt", "cache"));
  if (salt.has_value()) {
    if (salt->empty() || salt->size() > kMaxCacheSaltBytes)
      return field_error("cache.salt", fmt::format("must be 1 to {} bytes", kMaxCacheSaltBytes));
    out.salt = *salt;
  }
  return ok_status();
}

Status read_openai_cache_fields(const Json& body, CacheDirectives& out) {
  DS_ASSIGN_OR_RETURN(std::optional<std::string> key, read_string(body, "prompt_cache_key", ""));
  if (key.has_value()) {
    if (key->empty() || key->size() > kMaxPromptCacheKeyBytes)
      return field_error("prompt_cache_key", fmt::format("must be 1 to {} bytes", kMaxPromptCacheKeyBytes));
    out.prompt_cache_key = *key;
  }
  DS_ASSIGN_OR_RETURN(std::optional<std::string> retention, read_string(body, "prompt_cache_retention", ""));
  if (!retention.has_value()) return ok_status();
  if (*retention == "in-memory") {
    out.pool_only = true;
  } else if (*retention == "24h") {
    out.ttl_s = 86400;
  } else {
    return field_error("prompt_cache_retention",
                       fmt::format("unknown value '{}' (expected in-memory or 24h)", *retention));
  }
  return ok_status();
}

Status AnthropicBreakpoints::read(const Json& obj, std::string_view path, BreakpointSection section) {
  const Json* control = find_field(obj, "cache_control");
  if (control == nullptr) return ok_status();
  const std::string control_path = join_path(path, "cache_control");
  if (!control->is_object())
    return field_error(control_path, fmt::format("expected object, got {}", json_type_name(*control)));
  DS_TRY(refuse_unknown_keys(*control, control_path, {"type", "ttl"}));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> type, read_string(*control, "type", control_path));
  if (!type.has_value()) return field_error(join_path(control_path, "type"), "required");
  if (*type != "ephemeral")
    return field_error(join_path(control_path, "type"),
                       fmt::format("unknown value '{}' (expected ephemeral)", *type));
  DS_ASSIGN_OR_RETURN(std::optional<std::string> ttl, read_string(*control, "ttl", control_path));
  int64_t ttl_s = 300;  // Anthropic's default: 5 minutes
  if (ttl.has_value()) {
    if (*ttl == "1h") {
      ttl_s = 3600;
    } else if (*ttl != "5m") {
      return field_error(join_path(control_path, "ttl"),
                         fmt::format("unknown value '{}' (expected 5m or 1h)", *ttl));
    }
  }
  if (static_cast<int32_t>(breakpoints_.size()) >= kMaxAnthropicBreakpoints)
    return field_error(control_path, fmt::format("a maximum of {} blocks with cache_control may be provided",
                                                 kMaxAnthropicBreakpoints));
  breakpoints_.push_back(Breakpoint{control_path, ttl_s, section});
  return ok_status();
}

Status AnthropicBreakpoints::finish(CacheDirectives& out) const {
  std::vector<Breakpoint> in_prompt_order = breakpoints_;
  std::stable_sort(in_prompt_order.begin(), in_prompt_order.end(),
                   [](const Breakpoint& a, const Breakpoint& b) { return a.section < b.section; });
  int64_t shortest_so_far = INT64_MAX;
  int64_t longest = 0;
  for (const Breakpoint& b : in_prompt_order) {
    if (b.ttl_s > shortest_so_far)
      return field_error(join_path(b.path, "ttl"),
                         "a cache_control block with ttl 1h must not come after one with ttl 5m");
    shortest_so_far = std::min(shortest_so_far, b.ttl_s);
    longest = std::max(longest, b.ttl_s);
  }
  out.n_breakpoints = static_cast<int32_t>(breakpoints_.size());
  if (longest > 0) out.ttl_s = longest;
  return ok_status();
}

}  // namespace ds::recipe
