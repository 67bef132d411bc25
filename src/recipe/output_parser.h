// Incremental output parser (features spec §10.4, deepseek-recipe `stream/state_machine.rs`): turns
// the decoded text pieces of one generation into typed deltas (reasoning text, content text, tool
// call start, tool call argument text), whatever the piece boundaries are.
//
// Byte-level: each stage has a few labels (`</think>`, `<｜DSML｜`, `invoke name="`, stop strings,
// JSON fences) matched with KMP automata; bytes that may still become a label are held back until
// the next piece decides, so markers split across pieces are recognised and never leak. Both DSML
// dialects are accepted without a switch: the parser keys on `invoke name="` / `parameter name="`
// and on either closing tag (`</｜DSML｜tool_calls>` V4, `</｜DSML｜ calls>` V4.1).
//
// Tool-call arguments are rebuilt as JSON text while they stream: `{"` key `": ` value, joined by
// `, `, closed by `}` (`{}` with no parameters); a string="true" value is quoted and escaped, a
// string="false" value is copied raw (it is JSON already).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/chat_types.h"
#include "recipe/output_stage_machine.h"
#include "recipe/prompt.h"

namespace ds::recipe {

// The options a request and its rendered prompt imply (start stage, JSON mode, stop strings,
// tool parsing for the V4/V4.1 encodings, no newline dropping when continuing a prefix).
OutputParserOptions output_parser_options(const ChatRequest& request, const RenderedPrompt& prompt);

enum class OutputDeltaKind { reasoning, content, tool_call_start, tool_call_arguments };

struct OutputDelta {
  OutputDeltaKind kind = OutputDeltaKind::content;
  // reasoning / content / tool_call_arguments: the new text (UTF-8 when the input is);
  // tool_call_start: the function name.
  std::string text;
  int32_t tool_index = -1;  // tool_call_start / tool_call_arguments: 0, 1, ... in output order
};

// How the engine ended the generation (input to the finish reason).
enum class GenerationEnd {
  stop,            // end-of-sentence or a stop token
  length,          // max_tokens or the context limit
  content_filter,  // a filter cut it
  end_of_stream,   // the stream ended without a finish (cancelled, error, deadline)
};

// features spec §10.4; each API maps these to its own names.
enum class OutputFinishReason { stop, length, tool_calls, stop_sequence, content_filter, end_of_stream };
const char* output_finish_reason_name(OutputFinishReason reason);

class OutputParser {
 public:
  explicit OutputParser(const OutputParserOptions& options) : machine_(options) {}

  // One decoded piece and the number of tokens that produced it (for completion/reasoning token
  // counts). Returns the deltas it completes, same-kind neighbours merged. A piece may end inside
  // a UTF-8 character: the incomplete tail waits for the next piece.
  std::vector<OutputDelta> feed(std::string_view piece, int64_t n_tokens = 0);
  // The end of the generation: releases held-back text (a partial label is just text then).
  std::vector<OutputDelta> finish();

  // A stop sequence matched: everything after it is dropped; the caller should stop the engine.
  bool stop_sequence_matched() const { return !matched_stop_sequence_.empty(); }
  const std::string& matched_stop_sequence() const { return matched_stop_sequence_; }
  int32_t tool_call_count() const { return n_tool_calls_; }
  // Tokens fed up to and including the piece that held a stop sequence (markup included).
  int64_t completion_tokens() const { return completion_tokens_; }
  // Tokens of pieces that began while the parser was in reasoning (so `</think>` counts).
  int64_t reasoning_tokens() const { return reasoning_tokens_; }
  // Bytes dropped as invalid: a stray `</think>` in content, text after the tool block or stop.
  int64_t invalid_bytes() const { return invalid_bytes_; }

  OutputFinishReason finish_reason(GenerationEnd end) const;

 private:
  void apply(const std::vector<OutputSegment>& segments, std::vector<OutputDelta>& out);

  OutputStageMachine machine_;
  std::string utf8_carry_;  // an incomplete UTF-8 sequence at the end of the last piece
  std::string tool_name_;
  std::string matched_stop_sequence_;
  int32_t n_tool_calls_ = 0;
  int64_t completion_tokens_ = 0;
  int64_t reasoning_tokens_ = 0;
  int64_t invalid_bytes_ = 0;
  bool finished_ = false;
};

}  // namespace ds::recipe
