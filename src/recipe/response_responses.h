// OpenAI Responses (features spec §10.7): the non-stream `response` object and the stream of
// typed SSE events, each with a `sequence_number` counting from 0.
//
// Stream, in order:
//   begin():     response.created, response.in_progress (status in_progress, empty output)
//   on_deltas(): one output item per run of one kind, each opened by response.output_item.added:
//     reasoning  `rs_<id>_<n>`:  + response.content_part.added {reasoning_text},
//                                response.reasoning_text.delta ...
//     message    `msg_<id>_<n>`: + response.content_part.added {output_text},
//                                response.output_text.delta ...
//     function   `fc_<id>_<n>`:  {call_id:"call_<id>_<k>", name, arguments:""},
//                                response.function_call_arguments.delta ...
//     and closed by the matching `.done` event, response.content_part.done (text items) and
//     response.output_item.done (status completed). n is the item's output_index, k the call's
//     index among the tool calls. A `ns::name` tool is written as namespace "ns" + name "name".
//     A message's `phase` is "commentary" when a tool call follows it, else "final_answer".
//   finish():    closes the open item, then response.completed, or response.incomplete with
//                incomplete_details.reason max_output_tokens / content_filter.
// Usage: input_tokens, input_tokens_details.cached_tokens (= cache hits), output_tokens,
// output_tokens_details.reasoning_tokens, total_tokens.
#pragma once

#include <string>
#include <vector>

#include "recipe/response_common.h"

namespace ds::recipe {

Json responses_usage_json(const ResponseUsage& usage);

class ResponsesStream {
 public:
  explicit ResponsesStream(ResponseMeta meta) : meta_(std::move(meta)) {}

  StreamEvents begin();
  StreamEvents on_deltas(const std::vector<OutputDelta>& deltas);
  StreamEvents finish(OutputFinishReason reason, const ResponseUsage& usage);
  // The response object with the items closed so far: completed, or incomplete with its reason.
  Json final_response(OutputFinishReason reason, const ResponseUsage& usage) const;

 private:
  enum class Item { none, reasoning, message, function_call };
  void open(Item kind, const OutputDelta& first, StreamEvents& events);
  // `next`: the kind of item that follows (a message before a function call is commentary).
  void close(Item next, StreamEvents& events);
  StreamEvent event(std::string_view type, Json fields);
  Json response_object(std::string_view status) const;

  ResponseMeta meta_;
  int64_t sequence_number_ = 0;
  Item open_ = Item::none;
  Json open_item_;         // the open item as output_item.added showed it
  std::string open_text_;  // its text (or arguments) so far
  std::vector<Json> done_items_;
};

// The non-stream `response` object: items in the order reasoning, message, function calls.
Json responses_body(const ResponseMeta& meta, const CollectedOutput& output, OutputFinishReason reason,
                    const ResponseUsage& usage);

}  // namespace ds::recipe
