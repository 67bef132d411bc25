// Text helpers for validating untrusted file contents and quoting them in one-line error messages.
#pragma once

#include <string>
#include <string_view>

namespace ds {

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view s);

// 'name' in single quotes with control characters escaped (\n, \xNN) and long names cut to
// 200 bytes plus "...", so a hostile name cannot break the one-line error format.
std::string quoted_for_message(std::string_view s);

}  // namespace ds
