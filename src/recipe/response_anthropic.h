// Anthropic Messages responses (features spec §10.6): the non-stream `message` body and the
// stream of typed SSE events.
//
// Stream, in order:
//   begin():     message_start (empty content, usage with the prompt counts, output_tokens 0)
//   on_deltas(): a block per run of one kind, opened by content_block_start (thinking, text or
//                tool_use {id:"toolu_<id>_<i>", name, input:{}}); the first block is followed by
//                a ping; then content_block_delta (thinking_delta, text_delta, input_json_delta).
//                A thinking block closes with a signature_delta (the response id) before
//                content_block_stop.
//   finish():    closes the open block, message_delta {stop_reason, stop_sequence} with usage,
//                message_stop.
// Usage: cache_read_input_tokens = hits, cache_creation_input_tokens = the misses this request wrote
// into the prefix cache (ResponseUsage::cache_creation_tokens), input_tokens = prompt − both,
// output_tokens, service_tier "standard". The server fills message_start from the engine's first
// event, so the cache split is already right there.
#pragma once

#include <string>
#include <vector>

#include "recipe/response_common.h"

namespace ds::recipe {

// end_turn, max_tokens, tool_use, stop_sequence, refusal (content filter); a stream that ended
// without a finish is reported as end_turn (Anthropic has no reason for it).
const char* anthropic_stop_reason_name(OutputFinishReason reason);

Json anthropic_usage_json(const ResponseUsage& usage);

// "toolu_<id>_<index>"
std::string anthropic_tool_use_id(const ResponseMeta& meta, int32_t index);

class AnthropicMessagesStream {
 public:
  explicit AnthropicMessagesStream(ResponseMeta meta) : meta_(std::move(meta)) {}

  // `prompt_usage` needs only the prompt fields.
  StreamEvents begin(const ResponseUsage& prompt_usage);
  StreamEvents on_deltas(const std::vector<OutputDelta>& deltas);
  // `stop_sequence`: the matched stop sequence (OutputParser::matched_stop_sequence()), "" if none.
  StreamEvents finish(OutputFinishReason reason, const std::string& stop_sequence,
                      const ResponseUsage& usage);

 private:
  enum class Block { none, thinking, text, tool_use };
  void open(Block kind, Json content_block, StreamEvents& events);
  void close(StreamEvents& events);
  void delta(Json delta, StreamEvents& events) const;

  ResponseMeta meta_;
  Block open_ = Block::none;
  int32_t open_tool_index_ = -1;
  int32_t n_blocks_ = 0;  // blocks opened so far; the open one is n_blocks_ - 1
};

// The non-stream `message` body. A tool call's `input` is its arguments parsed as JSON; arguments
// that are not a JSON object (a model error) give {}.
Json anthropic_message_body(const ResponseMeta& meta, const CollectedOutput& output,
                            OutputFinishReason reason, const std::string& stop_sequence,
                            const ResponseUsage& usage);

}  // namespace ds::recipe
