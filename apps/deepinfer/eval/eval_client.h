// One eval sample: a non-streamed Chat Completions call. The scored text is message.content; a
// separate reasoning_content (DeepSeek, vLLM's reasoning parsers) is kept for the log only.
#pragma once

#include <optional>
#include <string>

#include "client/http_client.h"
#include "eval/eval_report.h"

namespace ds::eval {

struct EvalRequestOptions {
  std::string model;
  std::string api_key;
  std::string system_prompt;
  int64_t max_tokens = 512;
  double temperature = 0.0;
  std::optional<double> top_p;
  std::optional<bool> thinking;  // nullopt: the server's default
  std::string reasoning_effort;  // "" = not sent
  std::optional<int64_t> seed;   // sent as seed + sample index when set
  // A non-streamed answer arrives whole: long reasoning can keep the connection silent for long.
  int64_t timeout_s = 3600;
};

std::string eval_request_body(const EvalRequestOptions& o, const std::string& user_message, int sample_index);

// Sends one sample and fills ok/error/content/reasoning/completion_tokens/latency_s (not the score).
SampleResult run_sample(const client::BaseUrl& base, const EvalRequestOptions& o,
                        const std::string& user_message, int sample_index);

}  // namespace ds::eval
