#include "grammar/json_formats.h"

#include <fmt/format.h>

#include <string>
#include <vector>

namespace ds::grammar {

namespace {

const char* const kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
const char* const kDate =
    "[0-9]{4}-((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)";

// Decimal integers of one digit count in [lo, hi] (same length strings, lo <= hi).
std::string same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return "";
  if (lo == hi) return lo;
  const size_t rest = lo.size() - 1;
  if (lo[0] == hi[0]) return fmt::format("{}({})", lo[0], same_length(lo.substr(1), hi.substr(1)));
  const bool lo_zeros = lo.substr(1) == std::string(rest, '0');
  const bool hi_nines = hi.substr(1) == std::string(rest, '9');
  const std::string any_rest = rest == 0 ? std::string() : fmt::format("[0-9]{{{}}}", rest);
  std::vector<std::string> parts;
  char first_full = lo[0], last_full = hi[0];
  if (!lo_zeros) {
    parts.push_back(fmt::format("{}({})", lo[0], same_length(lo.substr(1), std::string(rest, '9'))));
    ++first_full;
  }
  if (!hi_nines) --last_full;
  if (first_full <= last_full) parts.push_back(fmt::format("[{}-{}]{}", first_full, last_full, any_rest));
  if (!hi_nines)
    parts.push_back(fmt::format("{}({})", hi[0], same_length(std::string(rest, '0'), hi.substr(1))));
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += '|';
    out += parts[i];
  }
  return out;
}

// Non-negative integers in [lo, hi]; hi < 0 means unbounded.
std::string non_negative(uint64_t lo, int64_t hi_or_open) {
  std::vector<std::string> parts;
  const std::string lo_s = std::to_string(lo);
  uint64_t pow = 1;
  for (size_t i = 1; i < lo_s.size(); ++i) pow *= 10;
  for (size_t len = lo_s.size();; ++len, pow *= 10) {
    const uint64_t len_min = len == 1 ? 0 : pow;
    const uint64_t len_max = len >= 19 ? UINT64_MAX : pow * 10 - 1;
    const uint64_t a = std::max<uint64_t>(lo, len_min);
    if (hi_or_open >= 0 && a > static_cast<uint64_t>(hi_or_open)) break;
    if (hi_or_open < 0 && len > lo_s.size()) {
      parts.push_back(fmt::format("[1-9][0-9]{{{},}}", len - 1));
      break;
    }
    const uint64_t b =
        hi_or_open >= 0 ? std::min<uint64_t>(static_cast<uint64_t>(hi_or_open), len_max) : len_max;
    parts.push_back(fmt::format("({})", same_length(std::to_string(a), std::to_string(b))));
    if (len >= 19) break;
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += '|';
    out += parts[i];
  }
  return out;
}

}  // namespace

std::optional<std::string> format_regex(std::string_view format) {
  if (format == "date") return std::string(kDate);
  if (format == "time") return std::string(kTime);
  if (format == "date-time") return std::string(kDate) + "T" + kTime;
  if (format == "email")
    return std::string(
        "[a-zA-Z0-9_+-]+(\\.[a-zA-Z0-9_+-]+)*@[a-zA-Z0-9-]+(\\.[a-zA-Z0-9-]+)*\\.[a-zA-Z]{2,}");
  if (format == "uuid")
    return std::string("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
  if (format == "uri") return std::string("[a-zA-Z][a-zA-Z0-9+.-]*:(//)?[a-zA-Z0-9._~%!$&'()*+,;=:@/?#-]+");
  if (format == "ipv4") {
    const std::string octet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
    return "(" + octet + "\\.){3}" + octet;
  }
  return std::nullopt;
}

std::string integer_range_regex(std::optional<int64_t> min, std::optional<int64_t> max) {
  std::vector<std::string> parts;
  // Negative part: -(magnitudes in [max(1, -max), -min]).
  if (!min || *min < 0) {
    const uint64_t mag_lo = max && *max < 0 ? static_cast<uint64_t>(-(*max + 1)) + 1 : 1;
    const int64_t mag_hi = min ? static_cast<int64_t>(static_cast<uint64_t>(-(*min + 1)) + 1) : -1;
    parts.push_back(fmt::format("-({})", non_negative(mag_lo, mag_hi)));
  }
  if (!max || *max >= 0) {
    const uint64_t lo = min && *min > 0 ? static_cast<uint64_t>(*min) : 0;
    parts.push_back(non_negative(lo, max ? *max : -1));
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += '|';
    out += parts[i];
  }
  return fmt::format("({})", out);
}

}  // namespace ds::grammar
