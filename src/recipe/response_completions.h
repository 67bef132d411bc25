// OpenAI Completions (legacy) responses: the `text_completion` body and its stream of chunks.
// The output goes through OutputParser in plain mode (start content, no newline dropping, no tool
// parsing; see completions_parser_options) so only stop strings apply; only content deltas are
// used.
//
// Stream: one chunk per content delta {choices:[{text, index:0, logprobs, finish_reason:null}]},
// then a chunk with text "" carrying finish_reason and usage, then `data: [DONE]`. With
// include_usage, earlier chunks carry usage:null.
// Logprobs use the legacy shape {tokens, token_logprobs, top_logprobs:[{token: logprob}],
// text_offset}; text_offset counts bytes from the start of the returned text.
#pragma once

#include <string>
#include <vector>

#include "recipe/response_common.h"

namespace ds::recipe {

OutputParserOptions completions_parser_options(const CompletionRequest& request);

// stop (also for a stop sequence), length, content_filter; a stream that ended without a finish
// is "stop" (the legacy API has nothing closer).
const char* completions_finish_reason_name(OutputFinishReason reason);

struct CompletionsResponseOptions {
  bool include_usage = false;
  bool logprobs = false;
  int64_t text_offset_start = 0;  // with echo: the bytes of the echoed prompt before the text
  int32_t choice_index = 0;       // `n` > 1: which choice these chunks and this body are
};

// Legacy logprobs of `tokens`; offsets start at `text_offset_start` bytes.
Json completions_logprobs_json(const std::vector<TokenLogprobInfo>& tokens, int64_t text_offset_start);

class CompletionsStream {
 public:
  CompletionsStream(ResponseMeta meta, CompletionsResponseOptions options)
      : meta_(std::move(meta)), options_(options), text_offset_(options.text_offset_start) {}

  // Logprobs ride on the next chunk, as in ChatCompletionsStream.
  StreamEvents on_deltas(const std::vector<OutputDelta>& deltas,
                         const std::vector<TokenLogprobInfo>& logprobs = {});
  StreamEvents finish(OutputFinishReason reason, const ResponseUsage& usage);
  // `n` > 1: as ChatCompletionsStream::finish_choice.
  StreamEvents finish_choice(OutputFinishReason reason);

 private:
  Json chunk(const std::string& text);

  ResponseMeta meta_;
  CompletionsResponseOptions options_;
  std::vector<TokenLogprobInfo> pending_logprobs_;
  int64_t text_offset_ = 0;  // where the next reported token starts, in bytes
};

Json completion_body(const ResponseMeta& meta, const CompletionsResponseOptions& options,
                     const std::string& text, OutputFinishReason reason, const ResponseUsage& usage,
                     const std::vector<TokenLogprobInfo>& logprobs = {});

}  // namespace ds::recipe
