#include "engine/request_stream.h"

#include <utility>

namespace ds {

RequestStream::RequestStream() : queue_(std::make_shared<Queue>()) {}

EventSink RequestStream::sink() const {
  return [q = queue_](TokenEvent&& event) {
    {
      std::lock_guard<std::mutex> lock(q->mu);
      if (event.finished) q->final_queued = true;
      q->events.push_back(std::move(event));
    }
    q->cv.notify_all();
  };
}

std::optional<TokenEvent> RequestStream::next() { return next_until(SteadyTime::max()); }

std::optional<TokenEvent> RequestStream::next_until(SteadyTime until) {
  if (final_returned_) return std::nullopt;
  std::unique_lock<std::mutex> lock(queue_->mu);
  const auto ready = [this] { return !queue_->events.empty(); };
  if (until == SteadyTime::max()) {
    queue_->cv.wait(lock, ready);
  } else if (!queue_->cv.wait_until(lock, until, ready)) {
    return std::nullopt;
  }
  TokenEvent event = std::move(queue_->events.front());
  queue_->events.pop_front();
  if (event.finished) final_returned_ = true;
  return event;
}

bool RequestStream::finished() const { return final_returned_; }

TokenEvent RequestStream::collect() {
  TokenEvent all;
  while (std::optional<TokenEvent> e = next()) {
    all.request_id = e->request_id;
    all.tokens.insert(all.tokens.end(), e->tokens.begin(), e->tokens.end());
    all.text += e->text;
    all.chosen_logprobs.insert(all.chosen_logprobs.end(), e->chosen_logprobs.begin(),
                               e->chosen_logprobs.end());
    for (auto& top : e->top_logprobs) all.top_logprobs.push_back(std::move(top));
    if (e->sequence_state) all.sequence_state = std::move(e->sequence_state);
    if (e->finished) {
      all.finished = true;
      all.finish_reason = e->finish_reason;
      all.error = e->error;
      all.usage = e->usage;
      all.queued_at = e->queued_at;
      all.first_scheduled_at = e->first_scheduled_at;
      all.first_token_at = e->first_token_at;
    }
  }
  return all;
}

}  // namespace ds
