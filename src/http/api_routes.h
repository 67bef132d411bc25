// The generation endpoints and the error style each answers in, in one table, so the app registers
// them consistently (and an unknown path under the same prefix fails in the same style).
#pragma once

#include <array>
#include <string_view>

#include "http/http_error.h"

namespace ds::server {

enum class ApiKind { chat_completions, completions, responses, anthropic_messages };

struct ApiRoute {
  std::string_view method;
  std::string_view path;
  ApiKind kind;
  ErrorStyle error_style;
};

// DeepSeek's Anthropic endpoint lives under /anthropic (the SDK appends /v1/messages; /anthropic/messages
// is accepted too), deepinfer-features §10.6.
inline constexpr std::array<ApiRoute, 6> kGenerationRoutes = {{
    {"POST", "/v1/chat/completions", ApiKind::chat_completions, ErrorStyle::openai},
    {"POST", "/v1/completions", ApiKind::completions, ErrorStyle::openai},
    {"POST", "/v1/responses", ApiKind::responses, ErrorStyle::openai},
    {"POST", "/v1/messages", ApiKind::anthropic_messages, ErrorStyle::anthropic},
    {"POST", "/anthropic/v1/messages", ApiKind::anthropic_messages, ErrorStyle::anthropic},
    {"POST", "/anthropic/messages", ApiKind::anthropic_messages, ErrorStyle::anthropic},
}};

}  // namespace ds::server
