// RequestOutput: one request's generation bookkeeping on the engine thread — the tokens sampled so
// far, the stop conditions (stop token ids and EOS, max_tokens, stop strings), incremental
// detokenization and the TokenEvent under construction.
//
// Two phases per step, so that async scheduling can overlap the expensive one with the next
// forward: add_token() right after sampling (cheap checks that decide whether the sequence takes
// part in the next step), take_event() later (detokenization and stop strings, which may still
// finish the request; its row in the step already launched is then wasted and dropped).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/request.h"
#include "sampling/sampler.h"
#include "sampling/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace ds {

class RequestOutput {
 public:
  // stop_ids: the model's EOS ids (ignored when request.stop.ignore_eos) are added to the
  // request's own stop_token_ids. tok may be null when the request does not detokenize.
  RequestOutput(RequestId id, const Request& request, const Tokenizer* tok, std::span<const int32_t> eos_ids);

  // The engine's limits on stop strings (the API layer enforces its own, stricter ones).
  static constexpr size_t kMaxStopStrings = 64;
  static constexpr size_t kMaxStopStringBytes = 1024;
  // invalid_argument naming "stop" when the stop strings break those limits or one is empty.
  static Status validate_stop_strings(const StopConditions& stop);

  // Records a sampled token (with its logprobs when asked). Returns the finish reason it causes:
  // stop (a stop token: excluded from the output), length (max_tokens reached) or none.
  // Precondition: !finished().
  FinishReason add_token(const SampleResult& sample);

  // Ends the request now (cancel, deadline, error, shutdown). No-op when already finished.
  void finish(FinishReason reason, Status error = {});

  // The event for everything added since the last call (detokenized; stop strings applied, which
  // may finish the request), or std::nullopt when there is nothing new to report. After the
  // final event (finished == true) it returns std::nullopt forever.
  // Detokenization errors (an id the tokenizer does not know) finish the request with an error.
  std::optional<TokenEvent> take_event();

  bool finished() const { return reason_ != FinishReason::none; }
  bool final_event_sent() const { return final_sent_; }
  FinishReason finish_reason() const { return reason_; }
  int64_t n_generated() const { return n_generated_; }  // sampled tokens, stop tokens included
  RequestId id() const { return id_; }

  TokenUsage usage;  // prompt and cached counts are set by the engine
  // Request::export_state: set by the engine with the first token, carried by the next event.
  std::shared_ptr<const std::vector<std::byte>> sequence_state;
  SteadyTime queued_at{};
  SteadyTime first_scheduled_at{};
  SteadyTime first_token_at{};

 private:
  // Passes decoded text through the stop-string matcher into event_text_; true on a match (the
  // request then finishes with `stop`, even when max_tokens was reached by the same token).
  bool append_text(std::string_view piece);

  RequestId id_;
  const Request* request_;  // owned by the engine's request record, outlives this
  std::vector<int32_t> stop_ids_;
  std::optional<StreamDetokenizer> detok_;
  std::optional<StopStringMatcher> stop_matcher_;  // only with stop strings
  int64_t n_generated_ = 0;
  FinishReason reason_ = FinishReason::none;
  Status error_;
  bool final_sent_ = false;
  // Not yet reported.
  std::vector<int32_t> new_tokens_;
  std::vector<TokenLogprob> new_chosen_;
  std::vector<std::vector<TokenLogprob>> new_top_;
  std::string event_text_;  // decoded and cleared for the next event
};

}  // namespace ds
