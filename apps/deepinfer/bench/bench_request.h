// One benchmark request: a streamed Chat Completions or Completions call, timed chunk by chunk.
// TTFT = first chunk carrying text (content, reasoning or completion text) after the send; ITL = the
// gaps between later text chunks (a chunk with several tokens counts once, as vllm bench serve does);
// token counts come from the final usage chunk (stream_options.include_usage); a server that sends no
// usage gets its text chunks counted as output tokens (usage_from_server = false in the record).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/bench_dataset.h"
#include "client/http_client.h"

namespace ds::bench {

struct RequestSpec {
  std::string endpoint = "chat";  // chat | completions
  std::string model;
  std::string api_key;
  bool ignore_eos = false;  // vLLM's extension; servers that do not know it ignore the field
  double temperature = 0.0;
};

struct RequestRecord {
  bool ok = false;
  std::string error;   // when !ok: the HTTP status and body, or the I/O error
  double start_s = 0;  // send time, seconds since the run started
  double ttft_s = 0;
  double e2e_s = 0;
  std::vector<double> itl_s;  // gaps between text chunks after the first
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  bool usage_from_server = false;
};

// The JSON body sent for `prompt` (stream on, usage on).
std::string request_body(const RequestSpec& spec, const BenchPrompt& prompt);

// Sends one request and times it; `run_start` is the run's time origin.
RequestRecord run_request(const client::BaseUrl& base, const RequestSpec& spec, const BenchPrompt& prompt,
                          std::chrono::steady_clock::time_point run_start);

}  // namespace ds::bench
