#include "recipe/api_responder.h"

#include <utility>

#include "recipe/response_anthropic.h"
#include "recipe/response_responses.h"

namespace ds::recipe {

namespace {

using Frames = StreamEvents;

class ChatResponder final : public ApiResponder {
 public:
  ChatResponder(const ResponseMeta& meta, const ChatResponseOptions& options)
      : meta_(meta), options_(options), stream_(meta, options) {}
  Frames begin(const ResponseUsage&) override { return stream_.begin(); }
  Frames on_deltas(const std::vector<OutputDelta>& deltas,
                   const std::vector<TokenLogprobInfo>& logprobs) override {
    return stream_.on_deltas(deltas, logprobs);
  }
  Frames finish(OutputFinishReason reason, const std::string&, const ResponseUsage& usage) override {
    return stream_.finish(reason, usage);
  }
  Json body(const CollectedOutput& output, OutputFinishReason reason, const std::string&,
            const ResponseUsage& usage, const std::vector<TokenLogprobInfo>& logprobs) override {
    return chat_completion_body(meta_, options_, output, reason, usage, logprobs);
  }
  Frames finish_choice(OutputFinishReason reason) override { return stream_.finish_choice(reason); }
  Frames end_stream(const ResponseUsage& usage) override {
    return recipe::openai_stream_end(meta_, "chat.completion.chunk", usage);
  }

 private:
  ResponseMeta meta_;
  ChatResponseOptions options_;
  ChatCompletionsStream stream_;
};

class CompletionsResponder final : public ApiResponder {
 public:
  // The stream sends the echo as its first text chunk, so its offsets start at 0 and count it;
  // the body puts it before the text, so its offsets start after it.
  CompletionsResponder(const ResponseMeta& meta, CompletionsResponseOptions options, std::string echo)
      : meta_(meta), options_(options), stream_(meta, options), echo_(std::move(echo)) {
    options_.text_offset_start = static_cast<int64_t>(echo_.size());
  }
  Frames begin(const ResponseUsage&) override {
    if (echo_.empty()) return {};
    return stream_.on_deltas({OutputDelta{OutputDeltaKind::content, echo_, -1}}, {});
  }
  Frames on_deltas(const std::vector<OutputDelta>& deltas,
                   const std::vector<TokenLogprobInfo>& logprobs) override {
    return stream_.on_deltas(deltas, logprobs);
  }
  Frames finish(OutputFinishReason reason, const std::string&, const ResponseUsage& usage) override {
    return stream_.finish(reason, usage);
  }
  Json body(const CollectedOutput& output, OutputFinishReason reason, const std::string&,
            const ResponseUsage& usage, const std::vector<TokenLogprobInfo>& logprobs) override {
    return completion_body(meta_, options_, echo_ + output.content, reason, usage, logprobs);
  }
  Frames finish_choice(OutputFinishReason reason) override { return stream_.finish_choice(reason); }
  Frames end_stream(const ResponseUsage& usage) override {
    return recipe::openai_stream_end(meta_, "text_completion", usage);
  }

 private:
  ResponseMeta meta_;
  CompletionsResponseOptions options_;
  CompletionsStream stream_;
  std::string echo_;
};

class AnthropicResponder final : public ApiResponder {
 public:
  explicit AnthropicResponder(const ResponseMeta& meta) : meta_(meta), stream_(meta) {}
  Frames begin(const ResponseUsage& prompt_usage) override { return stream_.begin(prompt_usage); }
  Frames on_deltas(const std::vector<OutputDelta>& deltas, const std::vector<TokenLogprobInfo>&) override {
    return stream_.on_deltas(deltas);
  }
  Frames finish(OutputFinishReason reason, const std::string& stop_sequence,
                const ResponseUsage& usage) override {
    return stream_.finish(reason, stop_sequence, usage);
  }
  Json body(const CollectedOutput& output, OutputFinishReason reason, const std::string& stop_sequence,
            const ResponseUsage& usage, const std::vector<TokenLogprobInfo>&) override {
    return anthropic_message_body(meta_, output, reason, stop_sequence, usage);
  }
  // The Messages API has no `n`: a single choice always closes with finish().
  Frames finish_choice(OutputFinishReason) override { return {}; }
  Frames end_stream(const ResponseUsage&) override { return {}; }

 private:
  ResponseMeta meta_;
  AnthropicMessagesStream stream_;
};

class ResponsesResponder final : public ApiResponder {
 public:
  explicit ResponsesResponder(const ResponseMeta& meta) : meta_(meta), stream_(meta) {}
  Frames begin(const ResponseUsage&) override { return stream_.begin(); }
  Frames on_deltas(const std::vector<OutputDelta>& deltas, const std::vector<TokenLogprobInfo>&) override {
    return stream_.on_deltas(deltas);
  }
  Frames finish(OutputFinishReason reason, const std::string&, const ResponseUsage& usage) override {
    return stream_.finish(reason, usage);
  }
  Json body(const CollectedOutput& output, OutputFinishReason reason, const std::string&,
            const ResponseUsage& usage, const std::vector<TokenLogprobInfo>&) override {
    return responses_body(meta_, output, reason, usage);
  }
  // The Responses API has no `n`.
  Frames finish_choice(OutputFinishReason) override { return {}; }
  Frames end_stream(const ResponseUsage&) override { return {}; }

 private:
  ResponseMeta meta_;
  ResponsesStream stream_;
};

}  // namespace

std::unique_ptr<ApiResponder> make_chat_responder(const ResponseMeta& meta,
                                                  const ChatResponseOptions& options) {
  return std::make_unique<ChatResponder>(meta, options);
}
std::unique_ptr<ApiResponder> make_completions_responder(const ResponseMeta& meta,
                                                         const CompletionsResponseOptions& options,
                                                         std::string echo) {
  return std::make_unique<CompletionsResponder>(meta, options, std::move(echo));
}
std::unique_ptr<ApiResponder> make_anthropic_responder(const ResponseMeta& meta) {
  return std::make_unique<AnthropicResponder>(meta);
}
std::unique_ptr<ApiResponder> make_responses_responder(const ResponseMeta& meta) {
  return std::make_unique<ResponsesResponder>(meta);
}

}  // namespace ds::recipe
