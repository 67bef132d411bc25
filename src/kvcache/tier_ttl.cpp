#include "kvcache/tier_ttl.h"

#include <charconv>

namespace ds {

int64_t TierTtlPolicy::ttl_for(std::string_view traffic_class) const {
  const auto it = ttl_s_by_class.find(traffic_class);
  return it == ttl_s_by_class.end() ? default_ttl_s : it->second;
}

Result<TierTtlPolicy> TierTtlPolicy::parse(std::string_view spec) {
  TierTtlPolicy policy;
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = spec.substr(0, comma);
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    auto bad = [&](const char* why) {
      return Status(ErrorCode::invalid_argument, "--kv-ttl item '" + std::string(item) + "': " + why);
    };
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) return bad("expected CLASS=DURATION, e.g. chat=7d");
    const std::string_view name = item.substr(0, eq), duration = item.substr(eq + 1);
    if (duration.size() < 2) return bad("expected a number and a unit (s, m, h, d)");
    int64_t n = 0;
    const auto [end, ec] = std::from_chars(duration.data(), duration.data() + duration.size() - 1, n);
    if (ec != std::errc{} || end != duration.data() + duration.size() - 1) return bad("not a number");
    int64_t unit_s = 0;
    switch (duration.back()) {
      case 's':
        unit_s = 1;
        break;
      case 'm':
        unit_s = 60;
        break;
      case 'h':
        unit_s = 3600;
        break;
      case 'd':
        unit_s = 86400;
        break;
      default:
        return bad("unit must be s, m, h or d");
    }
    if (n < 1 || n > (int64_t{1} << 40) / unit_s) return bad("TTL must be at least 1 s");
    if (name == "default") {
      policy.default_ttl_s = n * unit_s;
    } else {
      policy.ttl_s_by_class[std::string(name)] = n * unit_s;
    }
  }
  return policy;
}

}  // namespace ds
