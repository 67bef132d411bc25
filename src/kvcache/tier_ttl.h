// TTL per traffic class for the KV tiers (`--kv-ttl chat=7d,agent=3d,default=1d`): how long an
// entry written for a request of that class may be served. DeepSeek's service keeps agent traffic
// 3 days and chat 7 (issue #11). An expired entry is never served and is reclaimed (SSD: deleted
// when read or scanned; Redis: EXPIRE).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ds {

struct TierTtlPolicy {
  std::map<std::string, int64_t, std::less<>> ttl_s_by_class;
  int64_t default_ttl_s = 86400;

  // The class's TTL; an unknown or empty class gets the default.
  int64_t ttl_for(std::string_view traffic_class) const;

  // "chat=7d,agent=3d,default=1d": units s, m, h, d; `default` sets default_ttl_s.
  // invalid_argument naming the item for a missing '=', an empty class, a bad number or unit, or a
  // TTL < 1 s.
  static Result<TierTtlPolicy> parse(std::string_view spec);
};

}  // namespace ds
