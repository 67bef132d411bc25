#include "eval/eval_client.h"

#include <chrono>
#include <nlohmann/json.hpp>

namespace ds::eval {

using json = nlohmann::json;

std::string eval_request_body(const EvalRequestOptions& o, const std::string& user_message,
                              int sample_index) {
  json messages = json::array();
  if (!o.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", o.system_prompt}});
  messages.push_back({{"role", "user"}, {"content", user_message}});
  json body = {{"model", o.model},
               {"messages", messages},
               {"max_tokens", o.max_tokens},
               {"temperature", o.temperature}};
  if (o.top_p) body["top_p"] = *o.top_p;
  if (o.thinking) body["thinking"] = {{"type", *o.thinking ? "enabled" : "disabled"}};
  if (!o.reasoning_effort.empty()) body["reasoning_effort"] = o.reasoning_effort;
  if (o.seed) body["seed"] = *o.seed + sample_index;
  return body.dump();
}

SampleResult run_sample(const client::BaseUrl& base, const EvalRequestOptions& o,
                        const std::string& user_message, int sample_index) {
  SampleResult s;
  const auto start = std::chrono::steady_clock::now();
  const client::HttpCall call{.method = "POST",
                              .path = "/v1/chat/completions",
                              .body = eval_request_body(o, user_message, sample_index),
                              .api_key = o.api_key,
                              .timeout = std::chrono::seconds(o.timeout_s)};
  Result<client::HttpAnswer> answer = client::http_call(base, call);
  s.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!answer.ok()) {
    s.error = answer.status().message();
    return s;
  }
  if (answer->status != 200) {
    s.error = "HTTP " + std::to_string(answer->status) + ": " + answer->body.substr(0, 300);
    return s;
  }
  const json body = json::parse(answer->body, nullptr, false);
  if (body.is_discarded() || !body.contains("choices") || !body["choices"].is_array() ||
      body["choices"].empty() || !body["choices"][0].contains("message")) {
    s.error = "unexpected response body: " + answer->body.substr(0, 300);
    return s;
  }
  const json& message = body["choices"][0]["message"];
  if (message.contains("content") && message["content"].is_string())
    s.content = message["content"].get<std::string>();
  for (const char* key : {"reasoning_content", "reasoning"}) {
    if (message.contains(key) && message[key].is_string()) s.reasoning = message[key].get<std::string>();
  }
  if (body.contains("usage") && body["usage"].is_object())
    s.completion_tokens = body["usage"].value("completion_tokens", int64_t{0});
  s.ok = true;
  return s;
}

}  // namespace ds::eval
