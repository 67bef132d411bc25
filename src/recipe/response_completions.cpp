#include "recipe/response_completions.h"

namespace ds::recipe {

OutputParserOptions completions_parser_options(const CompletionRequest& request) {
  OutputParserOptions options;
  options.start = OutputStart::content;
  options.drop_leading_newlines = false;
  options.tool_markup = ToolCallMarkup::none;
  options.json_object = false;
  options.stop_sequences = request.sampling.stop;
  return options;
}

const char* completions_finish_reason_name(OutputFinishReason reason) {
  switch (reason) {
    case OutputFinishReason::length:
      return "length";
    case OutputFinishReason::content_filter:
      return "content_filter";
    default:
      return "stop";
  }
}

Json completions_logprobs_json(const std::vector<TokenLogprobInfo>& tokens, int64_t text_offset_start) {
  Json j = Json::object();
  Json texts = Json::array(), lps = Json::array(), tops = Json::array(), offsets = Json::array();
  int64_t offset = text_offset_start;
  for (const TokenLogprobInfo& t : tokens) {
    texts.push_back(lossy_utf8(t.bytes));
    lps.push_back(t.logprob);
    Json top = Json::object();
    for (const TopLogprob& alt : t.top) top[lossy_utf8(alt.bytes)] = alt.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += static_cast<int64_t>(t.bytes.size());
  }
  j["tokens"] = std::move(texts);
  j["token_logprobs"] = std::move(lps);
  j["top_logprobs"] = std::move(tops);
  j["text_offset"] = std::move(offsets);
  return j;
}

Json CompletionsStream::chunk(const std::string& text) {
  Json choice = Json::object();
  choice["text"] = text;
  choice["index"] = options_.choice_index;
  if (options_.logprobs && !pending_logprobs_.empty()) {
    choice["logprobs"] = completions_logprobs_json(pending_logprobs_, text_offset_);
    for (const TokenLogprobInfo& t : pending_logprobs_) text_offset_ += static_cast<int64_t>(t.bytes.size());
    pending_logprobs_.clear();
  } else {
    choice["logprobs"] = nullptr;
  }
  choice["finish_reason"] = nullptr;
  return openai_envelope(meta_, "text_completion", std::move(choice),
                         options_.include_usage ? Json(nullptr) : Json(Json::value_t::discarded));
}

StreamEvents CompletionsStream::on_deltas(const std::vector<OutputDelta>& deltas,
                                          const std::vector<TokenLogprobInfo>& logprobs) {
  if (options_.logprobs) pending_logprobs_.insert(pending_logprobs_.end(), logprobs.begin(), logprobs.end());
  StreamEvents events;
  for (const OutputDelta& d : deltas)
    if (d.kind == OutputDeltaKind::content) events.push_back(data_event(chunk(d.text)));
  return events;
}

StreamEvents CompletionsStream::finish(OutputFinishReason reason, const ResponseUsage& usage) {
  Json last = chunk("");
  last["choices"][0]["finish_reason"] = completions_finish_reason_name(reason);
  last["usage"] = openai_usage_json(usage);
  return {data_event(last), done_event()};
}

StreamEvents CompletionsStream::finish_choice(OutputFinishReason reason) {
  Json last = chunk("");
  last["choices"][0]["finish_reason"] = completions_finish_reason_name(reason);
  return {data_event(last)};
}

Json completion_body(const ResponseMeta& meta, const CompletionsResponseOptions& options,
                     const std::string& text, OutputFinishReason reason, const ResponseUsage& usage,
                     const std::vector<TokenLogprobInfo>& logprobs) {
  Json choice = Json::object();
  choice["text"] = text;
  choice["index"] = options.choice_index;
  choice["logprobs"] =
      options.logprobs ? completions_logprobs_json(logprobs, options.text_offset_start) : Json(nullptr);
  choice["finish_reason"] = completions_finish_reason_name(reason);
  return openai_envelope(meta, "text_completion", std::move(choice), openai_usage_json(usage));
}

}  // namespace ds::recipe
