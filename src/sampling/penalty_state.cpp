#include "sampling/penalty_state.h"

namespace ds {

PenaltyState PenaltyState::from_tokens(std::span<const int32_t> prompt_tokens,
                                       std::span<const int32_t> output_tokens) {
  PenaltyState state;
  state.add_prompt_tokens(prompt_tokens);
  for (const int32_t id : output_tokens) state.add_output_token(id);
  return state;
}

void PenaltyState::mark_seen(int32_t token_id) {
  const auto [it, inserted] = seen_index_.try_emplace(token_id, static_cast<uint32_t>(seen_ids_.size()));
  if (inserted) seen_ids_.push_back(token_id);
}

void PenaltyState::add_prompt_tokens(std::span<const int32_t> tokens) {
  for (const int32_t id : tokens) mark_seen(id);
}

void PenaltyState::add_output_token(int32_t token_id) {
  mark_seen(token_id);
  const auto [it, inserted] = output_index_.try_emplace(token_id, static_cast<uint32_t>(output_ids_.size()));
  if (inserted) {
    output_ids_.push_back(token_id);
    output_counts_.push_back(1);
  } else {
    ++output_counts_[it->second];
  }
  ++n_output_tokens_;
}

uint32_t PenaltyState::output_count(int32_t token_id) const {
  const auto it = output_index_.find(token_id);
  return it == output_index_.end() ? 0 : output_counts_[it->second];
}

bool PenaltyState::operator==(const PenaltyState& other) const {
  return seen_ids_ == other.seen_ids_ && output_ids_ == other.output_ids_ &&
         output_counts_ == other.output_counts_ && n_output_tokens_ == other.n_output_tokens_;
}

}  // namespace ds
