// The field path a client-error Status names: errors about one field of a request carry a message
// "PATH: MESSAGE" (recipe::field_error writes them), PATH an identifier chain with [i] indices
// ("messages[2].content"). Kept in base so the HTTP layer can fill OpenAI's `param` without
// depending on the recipe.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace ds {

// The PATH part of `status`'s message, or "" when the message does not start with one.
inline std::string status_field_path(const Status& status) {
  const std::string& msg = status.message();
  const size_t colon = msg.find(": ");
  if (colon == std::string::npos) return {};
  const std::string_view head(msg.data(), colon);
  // A path is an identifier chain with [i] indices; anything else (a sentence) is not a path.
  for (char c : head) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '[' || c == ']';
    if (!ok) return {};
  }
  return std::string(head);
}

}  // namespace ds
