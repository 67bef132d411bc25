#include "recipe/chat_types.h"

namespace ds::recipe {

const char* role_name(Role role) {
  switch (role) {
    case Role::system:
      return "system";
    case Role::user:
      return "user";
    case Role::assistant:
      return "assistant";
    case Role::tool:
      return "tool";
    case Role::developer:
      return "developer";
    case Role::latest_reminder:
      return "latest_reminder";
  }
  return "unknown";
}

const char* reasoning_effort_name(ReasoningEffort effort) {
  switch (effort) {
    case ReasoningEffort::low:
      return "low";
    case ReasoningEffort::high:
      return "high";
    case ReasoningEffort::xhigh:
      return "xhigh";
    case ReasoningEffort::max:
      return "max";
  }
  return "unknown";
}

const char* api_kind_name(ApiKind api) {
  switch (api) {
    case ApiKind::chat_completions:
      return "chat_completions";
    case ApiKind::completions:
      return "completions";
    case ApiKind::responses:
      return "responses";
    case ApiKind::anthropic_messages:
      return "anthropic_messages";
  }
  return "unknown";
}

}  // namespace ds::recipe
