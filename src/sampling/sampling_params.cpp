#include "sampling/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace ds {

namespace {

Status field_error(const char* field, const std::string& rule, double got) {
  return Status(ErrorCode::invalid_argument,
                std::string(field) + " must be " + rule + ", got " + std::to_string(got));
}

}  // namespace

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return field_error("temperature", "a finite number >= 0", temperature);
  }
  if (top_k < 0) return field_error("top_k", ">= 0 (0 = off)", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return field_error("top_p", "in (0, 1] (1 = off)", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return field_error("min_p", "in [0, 1] (0 = off)", min_p);
  if (!std::isfinite(repetition_penalty) || !(repetition_penalty > 0.0f)) {
    return field_error("repetition_penalty", "a finite number > 0 (1 = off)", repetition_penalty);
  }
  if (!(std::fabs(presence_penalty) <= kMaxAbsPenalty)) {
    return field_error("presence_penalty", "in [-2, 2]", presence_penalty);
  }
  if (!(std::fabs(frequency_penalty) <= kMaxAbsPenalty)) {
    return field_error("frequency_penalty", "in [-2, 2]", frequency_penalty);
  }
  for (const LogitBias& b : logit_bias) {
    if (b.token_id < 0) {
      return Status(ErrorCode::invalid_argument,
                    "logit_bias token id must be >= 0, got " + std::to_string(b.token_id));
    }
    if (!(std::fabs(b.bias) <= kMaxAbsLogitBias)) {
      return Status(ErrorCode::invalid_argument, "logit_bias for token " + std::to_string(b.token_id) +
                                                     " must be in [-100, 100], got " +
                                                     std::to_string(b.bias));
    }
  }
  if (logit_bias.size() > 1) {
    std::vector<int32_t> ids(logit_bias.size());
    std::transform(logit_bias.begin(), logit_bias.end(), ids.begin(),
                   [](const LogitBias& b) { return b.token_id; });
    std::sort(ids.begin(), ids.end());
    const auto dup = std::adjacent_find(ids.begin(), ids.end());
    if (dup != ids.end()) {
      return Status(ErrorCode::invalid_argument,
                    "logit_bias lists token " + std::to_string(*dup) + " more than once");
    }
  }
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs) {
    return field_error("top_logprobs", "in [0, 20]", top_logprobs);
  }
  if (top_logprobs > 0 && !logprobs) {
    return Status(ErrorCode::invalid_argument, "top_logprobs needs logprobs = true");
  }
  return ok_status();
}

Status SamplingParams::validate(size_t vocab_size) const {
  DS_TRY(validate());
  for (const LogitBias& b : logit_bias) {
    if (static_cast<size_t>(b.token_id) >= vocab_size) {
      return Status(ErrorCode::invalid_argument, "logit_bias token id " + std::to_string(b.token_id) +
                                                     " is outside the vocabulary [0, " +
                                                     std::to_string(vocab_size) + ")");
    }
  }
  return ok_status();
}

}  // namespace ds
