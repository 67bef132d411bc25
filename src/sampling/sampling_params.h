// SamplingParams: one request's sampling knobs, as the engine sees them (the API layer maps OpenAI /
// DeepSeek request fields onto this). Every "off" value is the neutral element of its operation, so a
// default-constructed SamplingParams is plain greedy decoding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "base/status.h"

namespace ds {

// Which distribution SampleResult's log-probabilities describe (see docs/sampling.md).
enum class LogprobsMode {
  raw,        // log_softmax of the model's logits before any processing (vLLM V1's default)
  processed,  // log of the distribution the token was actually drawn from (after bias, penalties,
              // temperature and truncation; tokens cut by top-k/top-p/min-p get -inf)
};

struct LogitBias {
  int32_t token_id = 0;
  float bias = 0.0f;  // added to the token's logit; OpenAI range [-100, 100]
};

// Field order: temperature and seed come first so `SamplingParams{temperature, seed}` keeps working.
struct SamplingParams {
  float temperature = 0.0f;  // 0 = greedy (argmax, ties to the lower id); else finite and > 0
  uint64_t seed = 0;         // RNG key: the draw is Philox(seed, output position, draft slot)
  int32_t top_k = 0;         // 0 = off; keep the k most likely tokens (k >= vocab is the same as off)
  float top_p = 1.0f;        // 1 = off; keep the smallest most-likely prefix with mass >= top_p, (0, 1]
  float min_p = 0.0f;        // 0 = off; keep tokens with prob >= min_p * max prob, [0, 1]
  float repetition_penalty = 1.0f;         // 1 = off; HF/vLLM rule over prompt and output tokens, > 0
  float presence_penalty = 0.0f;           // 0 = off; OpenAI rule over output tokens, [-2, 2]
  float frequency_penalty = 0.0f;          // 0 = off; OpenAI rule over output token counts, [-2, 2]
  std::vector<LogitBias> logit_bias = {};  // at most one entry per token id
  bool logprobs = false;                   // fill SampleResult::logprob
  int32_t top_logprobs = 0;                // 0..20 alternatives in SampleResult::top; needs logprobs
  LogprobsMode logprobs_mode = LogprobsMode::raw;

  static constexpr int32_t kMaxTopLogprobs = 20;  // OpenAI's limit
  static constexpr float kMaxAbsPenalty = 2.0f;   // presence/frequency, OpenAI's range
  static constexpr float kMaxAbsLogitBias = 100.0f;

  // Checks every field that does not depend on the vocabulary. Error: invalid_argument, the message
  // starts with the field's name ("top_p must be in (0, 1], got 1.5").
  Status validate() const;
  // The same, plus logit_bias token ids in [0, vocab_size).
  Status validate(size_t vocab_size) const;

  bool is_greedy() const { return temperature == 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
};

}  // namespace ds
