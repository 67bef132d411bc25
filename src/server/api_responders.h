// One interface over the four APIs' response builders (recipe/response_*.h), so a generation
// request is driven the same way whatever API it came from: the stream's opening frames, the
// frames of each step's deltas, the closing frames, or one non-stream JSON body.
//
// Frames are framed SSE text as the recipe builds it ("data: X\n\n", "event: E\ndata: X\n\n").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "recipe/output_parser.h"
#include "recipe/response_common.h"
#include "recipe/response_completions.h"
#include "recipe/response_openai_chat.h"

namespace ds::server {

class ApiResponder {
 public:
  virtual ~ApiResponder() = default;
  // Streaming only: the frames before any token. `prompt_usage` needs only prompt_tokens.
  virtual std::vector<std::string> begin(const recipe::ResponseUsage& prompt_usage) = 0;
  virtual std::vector<std::string> on_deltas(const std::vector<recipe::OutputDelta>& deltas,
                                             const std::vector<recipe::TokenLogprobInfo>& logprobs) = 0;
  // `stop_sequence`: the one the parser matched, "" if none.
  virtual std::vector<std::string> finish(recipe::OutputFinishReason reason, const std::string& stop_sequence,
                                          const recipe::ResponseUsage& usage) = 0;
  virtual recipe::Json body(const recipe::CollectedOutput& output, recipe::OutputFinishReason reason,
                            const std::string& stop_sequence, const recipe::ResponseUsage& usage,
                            const std::vector<recipe::TokenLogprobInfo>& logprobs) = 0;
  // `n` > 1 (Chat Completions and Completions only; the others have no `n`): one choice's closing
  // frames, and the stream's end once every choice has closed, with the whole request's usage.
  virtual std::vector<std::string> finish_choice(recipe::OutputFinishReason reason) = 0;
  virtual std::vector<std::string> end_stream(const recipe::ResponseUsage& usage) = 0;
};

std::unique_ptr<ApiResponder> make_chat_responder(const recipe::ResponseMeta& meta,
                                                  const recipe::ChatResponseOptions& options);
// `echo`: the prompt text the response starts with (Completions' echo), "" for none.
std::unique_ptr<ApiResponder> make_completions_responder(const recipe::ResponseMeta& meta,
                                                         const recipe::CompletionsResponseOptions& options,
                                                         std::string echo);
std::unique_ptr<ApiResponder> make_anthropic_responder(const recipe::ResponseMeta& meta);
std::unique_ptr<ApiResponder> make_responses_responder(const recipe::ResponseMeta& meta);

}  // namespace ds::server
