// OpenAI Chat Completions responses (features spec §10.5): the non-stream body and the stream of
// `chat.completion.chunk` SSE frames, with DeepSeek's `reasoning_content` and usage fields.
//
// Stream, in order:
//   begin():     delta {role:"assistant", content:null, reasoning_content:""} (thinking) or
//                {role:"assistant", content:""}
//   on_deltas(): reasoning {content:null, reasoning_content}, content {content} (+ reasoning_content:
//                null when thinking), a tool call's start {tool_calls:[{index, id:"call_<id>_<i>",
//                type:"function", function:{name, arguments:<what is known yet>}}]} and then its
//                arguments {tool_calls:[{index, function:{arguments}}]}
//   finish():    delta {content:""} with finish_reason and usage, then `data: [DONE]`.
// Usage always rides on the last chunk (as deepseek-recipe and DeepSeek's API do; OpenAI would
// send a separate chunk with empty choices). With include_usage, earlier chunks carry usage:null.
#pragma once

#include <string>
#include <vector>

#include "recipe/response_common.h"

namespace ds::recipe {

// stop, length, tool_calls, stop (for stop_sequence), content_filter, and DeepSeek's
// insufficient_system_resource for a stream that ended without a finish.
const char* chat_finish_reason_name(OutputFinishReason reason);

struct ChatResponseOptions {
  bool thinking = false;       // the message carries reasoning_content
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // choices[].logprobs is {content:[...]}, else null
  int32_t choice_index = 0;    // `n` > 1: which choice these chunks and this body are
};

class ChatCompletionsStream {
 public:
  ChatCompletionsStream(ResponseMeta meta, ChatResponseOptions options)
      : meta_(std::move(meta)), options_(options) {}

  StreamEvents begin();
  // The parser's deltas of one step and the logprobs of that step's tokens. Logprobs ride on the
  // first chunk this call emits; with no chunk they wait for the next one (at the latest the
  // final chunk), so the stream's logprobs concatenate to the non-stream list.
  StreamEvents on_deltas(const std::vector<OutputDelta>& deltas,
                         const std::vector<TokenLogprobInfo>& logprobs = {});
  StreamEvents finish(OutputFinishReason reason, const ResponseUsage& usage);
  // `n` > 1: the choice's closing chunk (finish_reason; no usage, no [DONE]): the stream ends with
  // openai_stream_end() once every choice has closed.
  StreamEvents finish_choice(OutputFinishReason reason);

 private:
  Json chunk(Json delta);

  ResponseMeta meta_;
  ChatResponseOptions options_;
  std::vector<TokenLogprobInfo> pending_logprobs_;
};

// The non-stream `chat.completion` body. `logprobs` is used when options.logprobs.
Json chat_completion_body(const ResponseMeta& meta, const ChatResponseOptions& options,
                          const CollectedOutput& output, OutputFinishReason reason,
                          const ResponseUsage& usage, const std::vector<TokenLogprobInfo>& logprobs = {});

// "call_<id>_<index>"; choices after the first (`n` > 1): "call_<id>_c<choice>_<index>", so ids
// stay unique across the response.
std::string chat_tool_call_id(const ResponseMeta& meta, int32_t index, int32_t choice_index = 0);

}  // namespace ds::recipe
