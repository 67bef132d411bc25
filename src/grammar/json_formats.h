// Regexes the JSON Schema compiler uses for string formats and integer ranges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ds::grammar {

// The regex for a JSON Schema "format" (date, time, date-time, email, uuid, uri, ipv4), or nullopt when
// the format is not supported. Dates are real calendar dates except February 29 (never produced).
std::optional<std::string> format_regex(std::string_view format);

// A regex matching exactly the decimal integers in [min, max] (either side open), in JSON's spelling:
// no leading zeros, no "-0". Precondition: min <= max when both are set.
std::string integer_range_regex(std::optional<int64_t> min, std::optional<int64_t> max);

}  // namespace ds::grammar
