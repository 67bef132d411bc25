// The byte-level stage machine under OutputParser (features spec §10.4; same stages and labels as
// deepseek-recipe `stream/state_machine.rs`). It knows nothing of deltas: it cuts the output into
// segments, each tagged with what to do with its bytes.
//
// Each stage has a list of branches: a label (KMP automaton over bytes), the stage to enter when
// it matches and the action for the matched bytes. Bytes no branch claims get the stage's
// "unmatched" action. Bytes that are a prefix of some label stay held back until a later byte
// decides (or until finish()). The first branch in list order wins when two complete on the same
// byte.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds::recipe {

// Where the model's output starts (from the rendered prompt).
enum class OutputStart {
  content,     // after `</think>` (or no thinking at all)
  reasoning,   // inside an open `<think>`
  tool_calls,  // inside `<｜DSML｜ calls>` (a forced tool_choice opened it)
};

// Which tool-call markup the model writes.
enum class ToolCallMarkup {
  none,  // tool markup is text (raw Completions)
  dsml,  // `<｜DSML｜…invoke name="…">` blocks (V4/V4.1)
  v3,  // `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>…`
};

struct OutputParserOptions {
  OutputStart start = OutputStart::content;
  // Drop newlines at the start of reasoning and of content (the model writes "\n" after <think>
  // and </think>). Off when continuing a client's prefix and for raw Completions.
  bool drop_leading_newlines = true;
  ToolCallMarkup tool_markup = ToolCallMarkup::dsml;
  // R1-style: a `<think>` as the first thing the model writes opens reasoning (encodings without a
  // thinking switch in the prompt, V3: a model that thinks on its own, like the demo model).
  bool think_tag_opens_reasoning = false;
  // response_format json_object: a "```json\n" or "```\n" fence or a raw `{`/`[` starts the JSON;
  // text outside it becomes spaces (one per byte), as DeepSeek's API does.
  bool json_object = false;
  // Matched only in content and inside detected JSON, never in reasoning or tool markup. Empty
  // strings are ignored.
  std::vector<std::string> stop_sequences;
};

enum class OutputAction : uint8_t {
  content,           // bytes are answer text
  to_space,          // JSON mode: text outside the JSON, each byte becomes ' '
  content_label,     // emit `label` as content (the `{` / `[` that opened raw JSON)
  reasoning,         // bytes are reasoning text
  skip,              // markup: dropped
  skip_invalid,      // dropped and counted (stray `</think>`, text after the end)
  stop_sequence,     // bytes are the matched stop sequence
  tool_call_begin,   // `invoke name="`: a new tool call
  tool_name,         // bytes are part of the function name
  tool_name_end,     // the closing `"` of the name
  arguments_label,   // emit `label` as argument text (`{"`, `, "`, `": `, `"`, `}`, `{}`)
  arguments_raw,     // bytes are argument text as is (a string="false" JSON value)
  arguments_string,  // bytes are argument text inside a JSON string: escape them
};

struct OutputSegment {
  OutputAction action = OutputAction::content;
  std::string bytes;
  std::string_view label;  // content_label / arguments_label only
};

class OutputStageMachine {
 public:
  explicit OutputStageMachine(const OutputParserOptions& options);
  OutputStageMachine(const OutputStageMachine&) = delete;
  OutputStageMachine& operator=(const OutputStageMachine&) = delete;
  OutputStageMachine(OutputStageMachine&&) noexcept = default;
  OutputStageMachine& operator=(OutputStageMachine&&) noexcept = default;

  // Appends the segments the bytes complete to `out`.
  void feed(std::string_view bytes, std::vector<OutputSegment>& out);
  // Releases held-back bytes with the current stage's unmatched action.
  void finish(std::vector<OutputSegment>& out);

  bool in_reasoning() const { return stage_ == Stage::reasoning; }
  bool finished() const { return stage_ == Stage::finished; }

  enum class Stage : uint8_t {
    content,
    json,          // inside detected JSON (JSON mode)
    matched_json,  // after the closing fence (JSON mode)
    tool_calls,
    tool_name,
    tool_arguments,
    param_name,
    param_type,
    param_value_string,
    param_value_json,
    v3_call_type,   // after `<｜tool▁call▁begin｜>`: "function" until `<｜tool▁sep｜>`
    v3_tool_name,   // the name, until "\n"
    v3_args_open,   // until "```json\n"
    v3_arguments,   // JSON text, until "\n```"
    v3_call_end,    // until `<｜tool▁call▁end｜>`
    v3_tool_calls,  // between calls: the next `<｜tool▁call▁begin｜>` or `<｜tool▁calls▁end｜>`
    reasoning,
    finished,
  };

 private:
  // A label and its KMP failure table, built once per machine.
  struct Pattern {
    std::string text;
    std::vector<uint32_t> fail;
  };
  enum class MatchKind : uint8_t {
    string,               // the label
    newlines_and_string,  // "\n*" then the label (the newlines are part of the match)
    leading_newline,      // a "\n" as the stage's first byte
    leading_string,       // the label, only as the stage's first bytes
  };
  struct Branch {
    MatchKind kind = MatchKind::string;
    const Pattern* pattern = nullptr;  // into patterns_
    Stage next = Stage::content;
    OutputAction action = OutputAction::skip;
    std::string_view label;
    bool next_leading = false;  // the next stage starts "leading" (drops newlines)
    // Match state.
    uint32_t matched = 0;        // label bytes matched so far
    uint32_t newline_count = 0;  // newlines_and_string: newlines before the label
    bool seen_first = false;     // leading_newline: the stage's first byte was seen
    bool newline_hit = false;    // leading_newline: and it was "\n"
    bool dead = false;           // leading_string: a byte before the label completed did not fit

    // Feeds one byte; true when the branch completed on it.
    bool step(uint8_t byte);
    uint32_t match_len() const;
  };

  void enter(Stage stage, bool leading);
  void add(MatchKind kind, size_t pattern_idx, Stage next, OutputAction action, std::string_view label = {},
           bool next_leading = false);
  void emit(OutputAction action, std::string_view bytes, std::string_view label,
            std::vector<OutputSegment>& out) const;

  OutputParserOptions options_;
  // The fixed labels (indexed by the constants in output_stage_machine.cpp), then the stop
  // sequences. Branches point into it; the vector is never resized after construction, and a
  // moved machine keeps the same heap buffer, so those pointers survive moves (copy is deleted).
  std::vector<Pattern> patterns_;

  Stage stage_ = Stage::content;
  OutputAction unmatched_ = OutputAction::content;
  std::vector<Branch> branches_;
  std::string stash_;  // bytes since the last emission (held back)
  bool reasoning_entered_ = false;
};

}  // namespace ds::recipe
