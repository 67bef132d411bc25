// PenaltyState: what repetition/presence/frequency penalties need to know about one request — the
// set of token ids seen in the prompt or the output, and how often each id occurs in the output.
// Updated in O(1) (amortised) per generated token; a pure function of (prompt, output so far), so a
// preempted request that is recomputed rebuilds exactly the same state with from_tokens().
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace ds {

class PenaltyState {
 public:
  PenaltyState() = default;

  // The state after the prompt and then each output token in turn.
  static PenaltyState from_tokens(std::span<const int32_t> prompt_tokens,
                                  std::span<const int32_t> output_tokens);

  void add_prompt_tokens(std::span<const int32_t> tokens);
  void add_output_token(int32_t token_id);

  // Distinct ids of prompt ∪ output, in first-seen order (the repetition penalty's set).
  std::span<const int32_t> seen_token_ids() const { return seen_ids_; }
  // Distinct ids of the output, in first-seen order, parallel to output_counts().
  std::span<const int32_t> output_token_ids() const { return output_ids_; }
  std::span<const uint32_t> output_counts() const { return output_counts_; }

  uint32_t output_count(int32_t token_id) const;
  bool seen(int32_t token_id) const { return seen_index_.count(token_id) != 0; }
  uint64_t n_output_tokens() const { return n_output_tokens_; }

  // Same sets and counts (first-seen order included, which from_tokens reproduces).
  bool operator==(const PenaltyState& other) const;

 private:
  void mark_seen(int32_t token_id);

  std::vector<int32_t> seen_ids_;
  std::unordered_map<int32_t, uint32_t> seen_index_;  // id -> index in seen_ids_
  std::vector<int32_t> output_ids_;
  std::vector<uint32_t> output_counts_;                 // parallel to output_ids_
  std::unordered_map<int32_t, uint32_t> output_index_;  // id -> index in output_ids_
  uint64_t n_output_tokens_ = 0;
};

}  // namespace ds
