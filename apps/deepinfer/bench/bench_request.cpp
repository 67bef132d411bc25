#include "bench/bench_request.h"

#include <nlohmann/json.hpp>

namespace ds::bench {

using json = nlohmann::json;

std::string request_body(const RequestSpec& spec, const BenchPrompt& prompt) {
  json body = {{"model", spec.model},
               {"max_tokens", prompt.max_tokens},
               {"temperature", spec.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (spec.endpoint == "chat") {
    body["messages"] = json::array({{{"role", "user"}, {"content", prompt.text}}});
  } else {
    body["prompt"] = prompt.text;
  }
  if (spec.ignore_eos) body["ignore_eos"] = true;
  return body.dump();
}

namespace {

double seconds_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Whether a chunk carries generated text (chat: content or reasoning; completions: text).
bool chunk_has_text(const json& chunk) {
  if (!chunk.contains("choices") || !chunk["choices"].is_array()) return false;
  for (const json& choice : chunk["choices"]) {
    for (const char* key : {"text", "delta"}) {
      if (!choice.contains(key)) continue;
      const json& v = choice[key];
      if (v.is_string() && !v.get<std::string>().empty()) return true;
      if (!v.is_object()) continue;
      for (const char* field : {"content", "reasoning_content", "reasoning"}) {
        if (v.contains(field) && v[field].is_string() && !v[field].get<std::string>().empty()) return true;
      }
      if (v.contains("tool_calls")) return true;
    }
  }
  return false;
}

}  // namespace

RequestRecord run_request(const client::BaseUrl& base, const RequestSpec& spec, const BenchPrompt& prompt,
                          std::chrono::steady_clock::time_point run_start) {
  RequestRecord rec;
  const auto sent = std::chrono::steady_clock::now();
  rec.start_s = seconds_between(run_start, sent);
  auto last_text = sent;
  int64_t text_chunks = 0;
  std::string bad_event;
  const client::HttpCall call{.method = "POST",
                              .path = spec.endpoint == "chat" ? "/v1/chat/completions" : "/v1/completions",
                              .body = request_body(spec, prompt),
                              .api_key = spec.api_key};
  Result<client::HttpAnswer> answer = client::http_call(base, call, [&](std::string_view data) {
    const auto now = std::chrono::steady_clock::now();
    if (data == "[DONE]") return true;  // vLLM, llama.cpp and we end with it; the body's end is what counts
    const json chunk = json::parse(data, nullptr, false);
    if (chunk.is_discarded()) {
      bad_event = "unparsable event: " + std::string(data.substr(0, 200));
      return false;
    }
    if (chunk.contains("error")) {
      bad_event = "error event: " + chunk["error"].dump();
      return false;
    }
    if (chunk_has_text(chunk)) {
      if (text_chunks == 0) {
        rec.ttft_s = seconds_between(sent, now);
      } else {
        rec.itl_s.push_back(seconds_between(last_text, now));
      }
      last_text = now;
      ++text_chunks;
    }
    if (chunk.contains("usage") && chunk["usage"].is_object()) {
      const json& u = chunk["usage"];
      rec.prompt_tokens = u.value("prompt_tokens", int64_t{0});
      rec.output_tokens = u.value("completion_tokens", int64_t{0});
      rec.usage_from_server = true;
    }
    return true;
  });
  rec.e2e_s = seconds_between(sent, std::chrono::steady_clock::now());
  if (!answer.ok()) {
    rec.error = answer.status().message();
  } else if (answer->status != 200) {
    rec.error = "HTTP " + std::to_string(answer->status) + ": " + answer->body.substr(0, 300);
  } else if (!bad_event.empty()) {
    rec.error = bad_event;
  } else if (text_chunks == 0) {
    rec.error = "the stream carried no text";
  } else {
    rec.ok = true;
    if (!rec.usage_from_server) rec.output_tokens = text_chunks;
  }
  return rec;
}

}  // namespace ds::bench
