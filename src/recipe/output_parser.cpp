#include "recipe/output_parser.h"

#include <utility>

#include "recipe/json_fields.h"

namespace ds::recipe {

namespace {

// Length of the incomplete UTF-8 sequence at the end of `s` (0 when it ends on a boundary or the
// tail is not a valid start: invalid bytes pass through, the JSON writers replace them).
size_t incomplete_utf8_tail(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto c = static_cast<uint8_t>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// Appends text to the last delta when it is the same kind (and the same call), else a new delta.
std::string& delta_text(std::vector<OutputDelta>& out, OutputDeltaKind kind, int32_t tool_index) {
  if (out.empty() || out.back().kind != kind || out.back().tool_index != tool_index ||
      kind == OutputDeltaKind::tool_call_start) {
    out.push_back(OutputDelta{kind, std::string(), tool_index});
  }
  return out.back().text;
}

}  // namespace

const char* output_finish_reason_name(OutputFinishReason reason) {
  switch (reason) {
    case OutputFinishReason::stop:
      return "stop";
    case OutputFinishReason::length:
      return "length";
    case OutputFinishReason::tool_calls:
      return "tool_calls";
    case OutputFinishReason::stop_sequence:
      return "stop_sequence";
    case OutputFinishReason::content_filter:
      return "content_filter";
    case OutputFinishReason::end_of_stream:
      return "end_of_stream";
  }
  return "?";
}

OutputParserOptions output_parser_options(const ChatRequest& request, const RenderedPrompt& prompt) {
  OutputParserOptions options;
  options.start = prompt.generation_in_tool_calls  ? OutputStart::tool_calls
                  : prompt.generation_in_reasoning ? OutputStart::reasoning
                                                   : OutputStart::content;
  // A client prefix ("prefix": true) is continued mid-text: its newlines are the model's to keep.
  options.drop_leading_newlines = request.messages.empty() || !request.messages.back().prefix;
  // DSML is the V4/V4.1 tool format; V3 has its own tool tokens, and no thinking switch: a V3
  // model that thinks (R1-style, the demo model) opens its reply with `<think>`.
  const bool v3 = prompt.encoding_name == "deepseek_v3";
  options.tool_markup = v3 ? ToolCallMarkup::v3 : ToolCallMarkup::dsml;
  options.think_tag_opens_reasoning = v3;
  options.json_object = request.response_format.kind == ResponseFormatKind::json_object;
  options.stop_sequences = request.sampling.stop;
  return options;
}

std::vector<OutputDelta> OutputParser::feed(std::string_view piece, int64_t n_tokens) {
  std::vector<OutputDelta> out;
  if (finished_) return out;
  // Token accounting: everything up to and including the piece that holds a stop sequence.
  if (!stop_sequence_matched()) {
    completion_tokens_ += n_tokens;
    if (machine_.in_reasoning()) reasoning_tokens_ += n_tokens;
  }
  std::string bytes = std::move(utf8_carry_);
  bytes.append(piece);
  const size_t tail = incomplete_utf8_tail(bytes);
  utf8_carry_ = bytes.substr(bytes.size() - tail);
  bytes.resize(bytes.size() - tail);
  std::vector<OutputSegment> segments;
  machine_.feed(bytes, segments);
  apply(segments, out);
  return out;
}

std::vector<OutputDelta> OutputParser::finish() {
  std::vector<OutputDelta> out;
  if (finished_) return out;
  finished_ = true;
  std::vector<OutputSegment> segments;
  // A dangling partial character is passed on as is (the JSON writers replace it).
  if (!utf8_carry_.empty()) machine_.feed(std::exchange(utf8_carry_, {}), segments);
  machine_.finish(segments);
  apply(segments, out);
  return out;
}

void OutputParser::apply(const std::vector<OutputSegment>& segments, std::vector<OutputDelta>& out) {
  for (const OutputSegment& seg : segments) {
    const int32_t current = n_tool_calls_ - 1;  // the open call, if any
    switch (seg.action) {
      case OutputAction::content:
        delta_text(out, OutputDeltaKind::content, -1) += seg.bytes;
        break;
      case OutputAction::to_space:
        delta_text(out, OutputDeltaKind::content, -1).append(seg.bytes.size(), ' ');
        break;
      case OutputAction::content_label:
        delta_text(out, OutputDeltaKind::content, -1) += seg.label;
        break;
      case OutputAction::reasoning:
        delta_text(out, OutputDeltaKind::reasoning, -1) += seg.bytes;
        break;
      case OutputAction::skip:
        break;
      case OutputAction::skip_invalid:
        invalid_bytes_ += static_cast<int64_t>(seg.bytes.size());
        break;
      case OutputAction::stop_sequence:
        if (matched_stop_sequence_.empty()) matched_stop_sequence_ = seg.bytes;
        break;
      case OutputAction::tool_call_begin:
        ++n_tool_calls_;
        tool_name_.clear();
        break;
      case OutputAction::tool_name:
        tool_name_ += seg.bytes;
        break;
      case OutputAction::tool_name_end:
        delta_text(out, OutputDeltaKind::tool_call_start, current) = tool_name_;
        break;
      case OutputAction::arguments_label:
        delta_text(out, OutputDeltaKind::tool_call_arguments, current) += seg.label;
        break;
      case OutputAction::arguments_raw:
        delta_text(out, OutputDeltaKind::tool_call_arguments, current) += seg.bytes;
        break;
      case OutputAction::arguments_string:
        append_json_escaped(delta_text(out, OutputDeltaKind::tool_call_arguments, current), seg.bytes);
        break;
    }
  }
}

OutputFinishReason OutputParser::finish_reason(GenerationEnd end) const {
  if (stop_sequence_matched()) return OutputFinishReason::stop_sequence;
  switch (end) {
    case GenerationEnd::stop:
      return n_tool_calls_ > 0 ? OutputFinishReason::tool_calls : OutputFinishReason::stop;
    case GenerationEnd::length:
      return OutputFinishReason::length;
    case GenerationEnd::content_filter:
      return OutputFinishReason::content_filter;
    case GenerationEnd::end_of_stream:
      return OutputFinishReason::end_of_stream;
  }
  return OutputFinishReason::stop;
}

}  // namespace ds::recipe
