// One interface over the four APIs' response builders (response_*.h), so the server drives a
// generation request the same way whatever API it came from: the stream's opening events, the
// events of each step's deltas, the closing events, or one non-stream JSON body.
//
// Events are names + JSON text (StreamEvent); the server frames them as SSE, once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "recipe/output_parser.h"
#include "recipe/response_common.h"
#include "recipe/response_completions.h"
#include "recipe/response_openai_chat.h"

namespace ds::recipe {

class ApiResponder {
 public:
  virtual ~ApiResponder() = default;
  // Streaming only: the frames before any token. `prompt_usage` needs only prompt_tokens.
  virtual StreamEvents begin(const ResponseUsage& prompt_usage) = 0;
  virtual StreamEvents on_deltas(const std::vector<OutputDelta>& deltas,
                                 const std::vector<TokenLogprobInfo>& logprobs) = 0;
  // `stop_sequence`: the one the parser matched, "" if none.
  virtual StreamEvents finish(OutputFinishReason reason, const std::string& stop_sequence,
                              const ResponseUsage& usage) = 0;
  virtual Json body(const CollectedOutput& output, OutputFinishReason reason,
                    const std::string& stop_sequence, const ResponseUsage& usage,
                    const std::vector<TokenLogprobInfo>& logprobs) = 0;
  // `n` > 1 (Chat Completions and Completions only; the others have no `n`): one choice's closing
  // events, and the stream's end once every choice has closed, with the whole request's usage.
  virtual StreamEvents finish_choice(OutputFinishReason reason) = 0;
  virtual StreamEvents end_stream(const ResponseUsage& usage) = 0;
};

std::unique_ptr<ApiResponder> make_chat_responder(const ResponseMeta& meta,
                                                  const ChatResponseOptions& options);
// `echo`: the prompt text the response starts with (Completions' echo), "" for none.
std::unique_ptr<ApiResponder> make_completions_responder(const ResponseMeta& meta,
                                                         const CompletionsResponseOptions& options,
                                                         std::string echo);
std::unique_ptr<ApiResponder> make_anthropic_responder(const ResponseMeta& meta);
std::unique_ptr<ApiResponder> make_responses_responder(const ResponseMeta& meta);

}  // namespace ds::recipe
