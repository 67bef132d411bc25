#include "recipe/output_stage_machine.h"

#include <algorithm>

namespace ds::recipe {

namespace {

// Indices of the fixed labels in patterns_; stop sequences follow from kFirstStop.
enum : size_t {
  kDsmlBegin,     // "<｜DSML｜": opens the tool block (after any newlines)
  kDsmlEnd,       // "</｜DSML｜": closes a parameter or an invoke
  kCallsEndV4,    // "</｜DSML｜tool_calls>"
  kCallsEndV41,   // "</｜DSML｜ calls>"
  kThinkEnd,      // "</think>"
  kJsonFence,     // "```json\n"
  kPlainFence,    // "```\n"
  kJsonClose,     // "\n```"
  kRawObject,     // "{"
  kRawArray,      // "["
  kInvokeName,    // "invoke name=\"" (V4 "<｜DSML｜invoke", V4.1 "<｜DSML｜ invoke")
  kParamName,     // "parameter name=\""
  kQuote,         // "\""
  kTypeTrue,      // "true\">" (the end of ` string="true">`)
  kTypeFalse,     // "false\">"
  kThinkBegin,    // "<think>" (think_tag_opens_reasoning)
  kV3CallsBegin,  // V3 tool markers
  kV3CallsEnd,
  kV3CallBegin,
  kV3CallEnd,
  kV3Sep,
  kNewline,
  kFirstStop,
};

constexpr std::string_view kFixedLabels[kFirstStop] = {
    "<｜DSML｜",
    "</｜DSML｜",
    "</｜DSML｜tool_calls>",
    "</｜DSML｜ calls>",
    "</think>",
    "```json\n",
    "```\n",
    "\n```",
    "{",
    "[",
    "invoke name=\"",
    "parameter name=\"",
    "\"",
    "true\">",
    "false\">",
    "<think>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁calls▁end｜>",
    "<｜tool▁call▁begin｜>",
    "<｜tool▁call▁end｜>",
    "<｜tool▁sep｜>",
    "\n",
};

// Labels emitted as argument text while a call's arguments are rebuilt as JSON.
constexpr std::string_view kArgsOpenFirstKey = "{\"";
constexpr std::string_view kArgsNextKey = ", \"";
constexpr std::string_view kArgsKeyEnd = "\": ";
constexpr std::string_view kArgsQuote = "\"";
constexpr std::string_view kArgsClose = "}";
constexpr std::string_view kArgsEmpty = "{}";

std::vector<uint32_t> kmp_failure(std::string_view text) {
  std::vector<uint32_t> fail(text.size(), 0);
  uint32_t len = 0;
  for (size_t i = 1; i < text.size();) {
    if (text[i] == text[len]) {
      fail[i++] = ++len;
    } else if (len != 0) {
      len = fail[len - 1];
    } else {
      fail[i++] = 0;
    }
  }
  return fail;
}

}  // namespace

bool OutputStageMachine::Branch::step(uint8_t byte) {
  const auto kmp_next = [&](uint32_t len) {
    const std::string& s = pattern->text;
    while (len > 0 && static_cast<uint8_t>(s[len]) != byte) len = pattern->fail[len - 1];
    if (static_cast<uint8_t>(s[len]) == byte) ++len;
    return len;
  };
  switch (kind) {
    case MatchKind::string:
      matched = kmp_next(matched);
      return matched == pattern->text.size();
    case MatchKind::newlines_and_string:
      if (matched == 0 && byte == '\n') {
        ++newline_count;
      } else {
        const uint32_t next = kmp_next(matched);
        // The run of newlines belongs to the label only while the label keeps growing from them.
        if (next <= matched) newline_count = 0;
        matched = next;
      }
      return matched == pattern->text.size();
    case MatchKind::leading_newline:
      if (!seen_first) newline_hit = byte == '\n';
      seen_first = true;
      return newline_hit;
    case MatchKind::leading_string:
      if (dead || matched >= pattern->text.size() || static_cast<uint8_t>(pattern->text[matched]) != byte) {
        dead = true;
        matched = 0;
        return false;
      }
      return ++matched == pattern->text.size();
  }
  return false;
}

uint32_t OutputStageMachine::Branch::match_len() const {
  switch (kind) {
    case MatchKind::string:
    case MatchKind::leading_string:
      return matched;
    case MatchKind::newlines_and_string:
      return matched + newline_count;
    case MatchKind::leading_newline:
      return newline_hit ? 1 : 0;
  }
  return 0;
}

OutputStageMachine::OutputStageMachine(const OutputParserOptions& options) : options_(options) {
  options_.stop_sequences.erase(
      std::remove(options_.stop_sequences.begin(), options_.stop_sequences.end(), std::string()),
      options_.stop_sequences.end());
  patterns_.reserve(kFirstStop + options_.stop_sequences.size());
  for (std::string_view label : kFixedLabels) patterns_.push_back({std::string(label), kmp_failure(label)});
  for (const std::string& stop : options_.stop_sequences) patterns_.push_back({stop, kmp_failure(stop)});
  switch (options_.start) {
    case OutputStart::content:
      enter(Stage::content, options_.drop_leading_newlines);
      break;
    case OutputStart::reasoning:
      enter(Stage::reasoning, options_.drop_leading_newlines);
      break;
    case OutputStart::tool_calls:
      enter(options_.tool_markup == ToolCallMarkup::v3 ? Stage::v3_tool_calls : Stage::tool_calls, false);
      break;
  }
}

void OutputStageMachine::add(MatchKind kind, size_t pattern_idx, Stage next, OutputAction action,
                             std::string_view label, bool next_leading) {
  Branch b;
  b.kind = kind;
  b.pattern = kind == MatchKind::leading_newline ? nullptr : &patterns_[pattern_idx];
  b.next = next;
  b.action = action;
  b.label = label;
  b.next_leading = next_leading;
  branches_.push_back(b);
}

void OutputStageMachine::enter(Stage stage, bool leading) {
  stage_ = stage;
  branches_.clear();
  stash_.clear();
  const auto add_stops = [&] {
    for (size_t i = kFirstStop; i < patterns_.size(); ++i)
      add(MatchKind::string, i, Stage::finished, OutputAction::stop_sequence);
  };
  const auto add_tool_block_begin = [&] {
    if (options_.tool_markup == ToolCallMarkup::dsml)
      add(MatchKind::newlines_and_string, kDsmlBegin, Stage::tool_calls, OutputAction::skip);
    if (options_.tool_markup == ToolCallMarkup::v3)
      add(MatchKind::newlines_and_string, kV3CallsBegin, Stage::v3_tool_calls, OutputAction::skip);
  };
  switch (stage) {
    case Stage::content:
      if (options_.json_object) {
        add(MatchKind::string, kJsonFence, Stage::json, OutputAction::skip);
        add(MatchKind::string, kPlainFence, Stage::json, OutputAction::skip);
        add(MatchKind::string, kRawObject, Stage::json, OutputAction::content_label, "{");
        add(MatchKind::string, kRawArray, Stage::json, OutputAction::content_label, "[");
      } else {
        add_stops();
      }
      add_tool_block_begin();
      if (leading) add(MatchKind::leading_newline, 0, Stage::content, OutputAction::skip, {}, true);
      if (leading && options_.think_tag_opens_reasoning && !reasoning_entered_)
        add(MatchKind::leading_string, kThinkBegin, Stage::reasoning, OutputAction::skip, {}, true);
      add(MatchKind::string, kThinkEnd, Stage::content, OutputAction::skip_invalid);
      unmatched_ = options_.json_object ? OutputAction::to_space : OutputAction::content;
      break;
    case Stage::json:
      add_stops();
      add(MatchKind::string, kJsonClose, Stage::matched_json, OutputAction::skip);
      unmatched_ = OutputAction::content;
      break;
    case Stage::matched_json:
      add_tool_block_begin();
      unmatched_ = OutputAction::to_space;
      break;
    case Stage::tool_calls:
      add(MatchKind::string, kInvokeName, Stage::tool_name, OutputAction::tool_call_begin);
      add(MatchKind::string, kCallsEndV4, Stage::finished, OutputAction::skip);
      add(MatchKind::string, kCallsEndV41, Stage::finished, OutputAction::skip);
      unmatched_ = OutputAction::skip;
      break;
    case Stage::tool_name:
      add(MatchKind::string, kQuote, Stage::tool_arguments, OutputAction::tool_name_end, {}, true);
      unmatched_ = OutputAction::tool_name;
      break;
    case Stage::tool_arguments:
      add(MatchKind::string, kParamName, Stage::param_name, OutputAction::arguments_label,
          leading ? kArgsOpenFirstKey : kArgsNextKey);
      add(MatchKind::string, kDsmlEnd, Stage::tool_calls, OutputAction::arguments_label,
          leading ? kArgsEmpty : kArgsClose);
      unmatched_ = OutputAction::skip;
      break;
    case Stage::param_name:
      add(MatchKind::string, kQuote, Stage::param_type, OutputAction::arguments_label, kArgsKeyEnd);
      // Keys are escaped like string values (the reference copies them raw), so a key with a
      // backslash or a newline still gives valid JSON.
      unmatched_ = OutputAction::arguments_string;
      break;
    case Stage::param_type:
      add(MatchKind::string, kTypeTrue, Stage::param_value_string, OutputAction::arguments_label, kArgsQuote);
      add(MatchKind::string, kTypeFalse, Stage::param_value_json, OutputAction::skip);
      unmatched_ = OutputAction::skip;
      break;
    case Stage::param_value_string:
      add(MatchKind::string, kDsmlEnd, Stage::tool_arguments, OutputAction::arguments_label, kArgsQuote);
      unmatched_ = OutputAction::arguments_string;
      break;
    case Stage::param_value_json:
      add(MatchKind::string, kDsmlEnd, Stage::tool_arguments, OutputAction::skip);
      unmatched_ = OutputAction::arguments_raw;
      break;
    case Stage::v3_tool_calls:
      add(MatchKind::string, kV3CallBegin, Stage::v3_call_type, OutputAction::tool_call_begin);
      add(MatchKind::string, kV3CallsEnd, Stage::finished, OutputAction::skip);
      unmatched_ = OutputAction::skip;
      break;
    case Stage::v3_call_type:
      add(MatchKind::string, kV3Sep, Stage::v3_tool_name, OutputAction::skip);
      unmatched_ = OutputAction::skip;
      break;
    case Stage::v3_tool_name:
      add(MatchKind::string, kNewline, Stage::v3_args_open, OutputAction::tool_name_end);
      unmatched_ = OutputAction::tool_name;
      break;
    case Stage::v3_args_open:
      add(MatchKind::string, kJsonFence, Stage::v3_arguments, OutputAction::skip);
      unmatched_ = OutputAction::skip;
      break;
    case Stage::v3_arguments:
      add(MatchKind::string, kJsonClose, Stage::v3_call_end, OutputAction::skip);
      unmatched_ = OutputAction::arguments_raw;
      break;
    case Stage::v3_call_end:
      add(MatchKind::string, kV3CallEnd, Stage::v3_tool_calls, OutputAction::skip);
      unmatched_ = OutputAction::skip;
      break;
    case Stage::reasoning:
      reasoning_entered_ = true;  // a second `<think>` after `</think>` is content
      add_tool_block_begin();
      if (leading) add(MatchKind::leading_newline, 0, Stage::reasoning, OutputAction::skip, {}, true);
      // The answer after `</think>` always drops its leading newlines (the model writes "\n\n").
      add(MatchKind::newlines_and_string, kThinkEnd, Stage::content, OutputAction::skip, {}, true);
      unmatched_ = OutputAction::reasoning;
      break;
    case Stage::finished:
      unmatched_ = OutputAction::skip_invalid;
      break;
  }
}

void OutputStageMachine::emit(OutputAction action, std::string_view bytes, std::string_view label,
                              std::vector<OutputSegment>& out) const {
  out.push_back(OutputSegment{action, std::string(bytes), label});
}

void OutputStageMachine::feed(std::string_view bytes, std::vector<OutputSegment>& out) {
  for (const char c : bytes) {
    stash_.push_back(c);
    const Branch* hit = nullptr;
    for (Branch& b : branches_) {
      if (b.step(static_cast<uint8_t>(c))) {
        hit = &b;
        break;
      }
    }
    if (hit == nullptr) continue;
    const size_t match_len = hit->match_len();
    const std::string_view stash = stash_;
    if (match_len < stash.size()) emit(unmatched_, stash.substr(0, stash.size() - match_len), {}, out);
    if (match_len > 0) emit(hit->action, stash.substr(stash.size() - match_len), hit->label, out);
    const Stage next = hit->next;
    const bool next_leading = hit->next_leading;
    enter(next, next_leading);
  }
  uint32_t hold = 0;
  for (const Branch& b : branches_) hold = std::max(hold, b.match_len());
  if (hold < stash_.size()) {
    emit(unmatched_, std::string_view(stash_).substr(0, stash_.size() - hold), {}, out);
    stash_.erase(0, stash_.size() - hold);
  }
}

void OutputStageMachine::finish(std::vector<OutputSegment>& out) {
  if (!stash_.empty()) emit(unmatched_, stash_, {}, out);
  stash_.clear();
}

}  // namespace ds::recipe
