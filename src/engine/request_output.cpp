#include "engine/request_output.h"

#include <algorithm>
#include <utility>

namespace ds {

RequestOutput::RequestOutput(RequestId id, const Request& request, const Tokenizer* tok,
                             std::span<const int32_t> eos_ids)
    : id_(id), request_(&request), stop_ids_(request.stop.stop_token_ids) {
  if (!request.stop.ignore_eos) stop_ids_.insert(stop_ids_.end(), eos_ids.begin(), eos_ids.end());
  if (tok != nullptr && request.detokenize) detok_.emplace(*tok, /*skip_special=*/true);
  if (!request.stop.stop_strings.empty()) {
    Result<StopStringMatcher> m =
        StopStringMatcher::create(request.stop.stop_strings, kMaxStopStrings, kMaxStopStringBytes);
    if (m.ok()) stop_matcher_.emplace(std::move(m).value());  // else refused by the engine's validate()
  }
  usage.prompt_tokens = static_cast<int64_t>(request.prompt_tokens.size());
}

FinishReason RequestOutput::add_token(const SampleResult& sample) {
  ++n_generated_;
  usage.completion_tokens = n_generated_;
  const bool is_stop = std::find(stop_ids_.begin(), stop_ids_.end(), sample.token_id) != stop_ids_.end();
  if (is_stop) {
    finish(FinishReason::stop);
    return reason_;
  }
  new_tokens_.push_back(sample.token_id);
  if (request_->sampling.logprobs) {
    new_chosen_.push_back(TokenLogprob{sample.token_id, sample.logprob.value_or(0.0f)});
    const std::span<const TokenLogprob> top = sample.top_logprobs();
    new_top_.emplace_back(top.begin(), top.end());
  }
  if (n_generated_ >= request_->stop.max_tokens) finish(FinishReason::length);
  return reason_;
}

void RequestOutput::finish(FinishReason reason, Status error) {
  if (finished()) return;
  reason_ = reason;
  error_ = std::move(error);
}

Status RequestOutput::validate_stop_strings(const StopConditions& stop) {
  if (stop.stop_strings.empty()) return ok_status();
  return StopStringMatcher::create(stop.stop_strings, kMaxStopStrings, kMaxStopStringBytes).status();
}

bool RequestOutput::append_text(std::string_view piece) {
  if (!stop_matcher_) {
    event_text_ += piece;
    return false;
  }
  StopFeedResult r = stop_matcher_->feed(piece);
  event_text_ += r.text;
  if (!r.stopped) return false;
  if (reason_ == FinishReason::none || reason_ == FinishReason::length) reason_ = FinishReason::stop;
  return true;
}

std::optional<TokenEvent> RequestOutput::take_event() {
  if (final_sent_) return std::nullopt;
  if (detok_) {
    bool stop_string_matched = false;
    // Token by token, so that a stop string cuts the tokens after the one that completed it.
    for (size_t i = 0; i < new_tokens_.size(); ++i) {
      Result<std::string> piece = detok_->push(new_tokens_[i]);
      if (!piece.ok()) {
        new_tokens_.resize(i);
        if (!new_chosen_.empty()) {
          new_chosen_.resize(i);
          new_top_.resize(i);
        }
        reason_ = FinishReason::error;
        error_ = piece.status();
        break;
      }
      if (append_text(*piece)) {
        stop_string_matched = true;
        // Tokens sampled after the stop string completed are not part of the output.
        const int64_t dropped = static_cast<int64_t>(new_tokens_.size() - (i + 1));
        usage.completion_tokens -= dropped;
        new_tokens_.resize(i + 1);
        if (!new_chosen_.empty()) {
          new_chosen_.resize(i + 1);
          new_top_.resize(i + 1);
        }
        break;
      }
    }
    if (finished() && reason_ != FinishReason::error && !stop_string_matched) {
      if (!append_text(detok_->flush()) && stop_matcher_) event_text_ += stop_matcher_->flush();
    }
  }
  if (new_tokens_.empty() && event_text_.empty() && !finished()) return std::nullopt;
  TokenEvent event;
  event.request_id = id_;
  event.tokens = std::move(new_tokens_);
  event.text = std::move(event_text_);
  event.chosen_logprobs = std::move(new_chosen_);
  event.top_logprobs = std::move(new_top_);
  new_tokens_.clear();
  event_text_.clear();
  new_chosen_.clear();
  new_top_.clear();
  event.queued_at = queued_at;
  event.first_scheduled_at = first_scheduled_at;
  event.first_token_at = first_token_at;
  // Every event carries the usage so far: a stream's first frames report the cache split.
  event.usage = usage;
  event.sequence_state = std::move(sequence_state);
  sequence_state = nullptr;
  if (finished()) {
    event.finished = true;
    event.finish_reason = reason_;
    event.error = error_;
    final_sent_ = true;
  }
  return event;
}

}  // namespace ds
