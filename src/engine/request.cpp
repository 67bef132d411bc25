#include "engine/request.h"

namespace ds {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::none:
      return "none";
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::deadline:
      return "deadline";
    case FinishReason::error:
      return "error";
  }
  return "unknown";
}

}  // namespace ds
