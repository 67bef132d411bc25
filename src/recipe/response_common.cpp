#include "recipe/response_common.h"

namespace ds::recipe {

Json openai_usage_json(const ResponseUsage& usage) {
  Json j = Json::object();
  j["prompt_tokens"] = usage.prompt_tokens;
  j["completion_tokens"] = usage.completion_tokens;
  j["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  j["prompt_tokens_details"] = Json{{"cached_tokens", usage.prompt_cache_hit_tokens}};
  j["prompt_cache_hit_tokens"] = usage.prompt_cache_hit_tokens;
  j["prompt_cache_miss_tokens"] = usage.prompt_cache_miss_tokens();
  j["completion_tokens_details"] = Json{{"reasoning_tokens", usage.reasoning_tokens}};
  return j;
}

// A round trip through dump with replacement: nlohmann's writer already knows UTF-8.
std::string lossy_utf8(const std::string& bytes) {
  const std::string quoted = Json(bytes).dump(-1, ' ', false, Json::error_handler_t::replace);
  return Json::parse(quoted).get<std::string>();
}

Json system_fingerprint_json(const ResponseMeta& meta) {
  return meta.system_fingerprint.empty() ? Json(nullptr) : Json(meta.system_fingerprint);
}

Json openai_envelope(const ResponseMeta& meta, const char* object, Json choice, Json usage) {
  Json j = Json::object();
  j["id"] = meta.id;
  j["object"] = object;
  j["created"] = meta.created_unix_s;
  j["model"] = meta.model;
  j["system_fingerprint"] = system_fingerprint_json(meta);
  j["choices"] = Json::array({std::move(choice)});
  if (!usage.is_discarded()) j["usage"] = std::move(usage);
  return j;
}

namespace {

Json byte_values(const std::string& bytes) {
  Json j = Json::array();
  for (const char c : bytes) j.push_back(static_cast<int>(static_cast<uint8_t>(c)));
  return j;
}

}  // namespace

Result<TokenLogprobInfo> token_logprob_info(const Tokenizer& tokenizer, IdLogprob chosen,
                                            const std::vector<IdLogprob>& top) {
  TokenLogprobInfo info;
  info.token_id = chosen.token_id;
  info.logprob = chosen.logprob;
  DS_ASSIGN_OR_RETURN(std::string_view bytes, tokenizer.token_bytes(chosen.token_id));
  info.bytes = std::string(bytes);
  info.top.reserve(top.size());
  for (const IdLogprob& alt : top) {
    DS_ASSIGN_OR_RETURN(std::string_view alt_bytes, tokenizer.token_bytes(alt.token_id));
    info.top.push_back(TopLogprob{alt.token_id, std::string(alt_bytes), alt.logprob});
  }
  return info;
}

Json openai_logprobs_content(const std::vector<TokenLogprobInfo>& tokens) {
  Json content = Json::array();
  for (const TokenLogprobInfo& t : tokens) {
    Json top = Json::array();
    for (const TopLogprob& alt : t.top) {
      top.push_back(Json{
          {"token", lossy_utf8(alt.bytes)}, {"logprob", alt.logprob}, {"bytes", byte_values(alt.bytes)}});
    }
    content.push_back(Json{{"token", lossy_utf8(t.bytes)},
                           {"logprob", t.logprob},
                           {"bytes", byte_values(t.bytes)},
                           {"top_logprobs", std::move(top)}});
  }
  return content;
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

StreamEvents openai_stream_end(const ResponseMeta& meta, const char* object, const ResponseUsage& usage) {
  Json last = openai_envelope(meta, object, Json(), openai_usage_json(usage));
  last["choices"] = Json::array();
  return {data_event(last), done_event()};
}

Json openai_merge_choices(std::vector<Json> bodies, const ResponseUsage& usage) {
  if (bodies.empty()) return Json::object();
  Json choices = Json::array();
  for (Json& b : bodies) choices.push_back(std::move(b["choices"][0]));
  Json out = std::move(bodies[0]);
  out["choices"] = std::move(choices);
  out["usage"] = openai_usage_json(usage);
  return out;
}

StreamEvent data_event(const Json& data) { return StreamEvent{"", dump_json(data)}; }

StreamEvent named_event(std::string_view name, const Json& data) {
  return StreamEvent{std::string(name), dump_json(data)};
}

StreamEvent done_event() { return StreamEvent{"", "[DONE]"}; }

void CollectedOutput::add(const OutputDelta& delta) {
  switch (delta.kind) {
    case OutputDeltaKind::reasoning:
      reasoning += delta.text;
      break;
    case OutputDeltaKind::content:
      content += delta.text;
      break;
    case OutputDeltaKind::tool_call_start:
      if (delta.tool_index >= 0) {
        if (tool_calls.size() <= static_cast<size_t>(delta.tool_index))
          tool_calls.resize(static_cast<size_t>(delta.tool_index) + 1);
        tool_calls[static_cast<size_t>(delta.tool_index)].name = delta.text;
      }
      break;
    case OutputDeltaKind::tool_call_arguments:
      if (delta.tool_index >= 0) {
        if (tool_calls.size() <= static_cast<size_t>(delta.tool_index))
          tool_calls.resize(static_cast<size_t>(delta.tool_index) + 1);
        tool_calls[static_cast<size_t>(delta.tool_index)].arguments += delta.text;
      }
      break;
  }
}

}  // namespace ds::recipe
