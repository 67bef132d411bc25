// Token sampling from one logits row.
//
// Processing order (each step sees the previous step's output):
//   1. logit bias                      l[t] += bias[t]
//   2. penalties                       repetition (prompt ∪ output), then presence/frequency (output)
//   3. temperature 0                   -> argmax of the processed logits, ties to the lower id; stop
//   4. / temperature                   z = l / T (NaN -> -inf, +inf -> FLT_MAX); survivors: z > -inf
//   5. top-k                           keep the k first survivors in rank order
//   6. top-p                           keep the shortest rank-order prefix whose mass reaches top_p
//   7. min-p                           keep tokens with prob >= min_p · (max prob)
//   8. one draw                        u = Philox(seed, position, draft_slot) in [0, 1); walk the
//                                      kept tokens in rank order and take the first whose running
//                                      mass exceeds u · (their total mass)
// Rank order = descending weight, then descending z, then the lower token id. The draw is a pure
// function of (logits, params, penalty state, seed, position, draft slot): the same inputs give the
// same token bit for bit whatever batch the request sits in and whatever was sampled before.
//
// Exact arithmetic (what reference_sampler.h implements literally, see sampling_rule.h):
// w_i = exp_approx(z_i - z_max) in float, then a fixed-point integer weight with 40 fractional bits;
// every mass is an exact integer sum, so it does not depend on summation order. top-p keeps token j
// iff double(mass ranked before j) < top_p · (mass after top-k); min-p keeps j iff w_j >= min_p; the
// draw takes the first kept token whose running mass exceeds floor(u · kept mass).
//
// Cost: the vocabulary (129,280 for V3) is never sorted. Three O(vocab) loops (max; exp, cloned per
// ISA; a histogram of weights by float exponent with a count and an exact mass per bucket, which also
// lists the tokens of the top buckets). The walks skip whole buckets by their mass; only a bucket
// where top-k, top-p, min-p or the draw cuts is collected (from the list, or with one more pass for a
// deep bucket) and sorted. All buffers are members, reused between calls: no allocation after
// warm-up. ~200 µs per temperature / top-p draw at vocab 129,280 (docs/sampling.md).
//
// Log-probabilities (params.logprobs): LogprobsMode::raw (the default, as vLLM V1) reports
// log_softmax of the model's logits before bias, penalties, temperature and truncation, i.e. the
// model's own belief, unchanged by the request's knobs; LogprobsMode::processed reports the log of
// the distribution the token was drawn from (-inf outside the survivors; at temperature 0, the
// log_softmax of the biased and penalised logits). See docs/sampling.md.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "kernels/isa.h"
#include "sampling/logprobs.h"
#include "sampling/penalty_state.h"
#include "sampling/sampling_params.h"
#include "sampling/sampling_rule.h"

namespace ds {

struct SamplerLoops;

struct SampleResult {
  int32_t token_id = 0;
  std::optional<float> logprob;  // of token_id; set iff params.logprobs
  // The params.top_logprobs most likely tokens of the logprobs distribution, descending (ties to
  // the lower id): top[0..n_top). In processed mode, at most the number of survivors.
  std::array<TokenLogprob, SamplingParams::kMaxTopLogprobs> top{};
  int32_t n_top = 0;

  std::span<const TokenLogprob> top_logprobs() const { return {top.data(), static_cast<size_t>(n_top)}; }
};

// Index of the largest logit; ties go to the lower index; NaN never wins (all-NaN -> 0).
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  // isa: the path of the vocabulary loops (every supported path draws the same tokens).
  explicit Sampler(Isa isa = best_isa());

  // Preconditions: params.validate(logits.size()) is ok and logits is non-empty.
  // position: the output token's index in its sequence (the RNG counter); draft_slot separates
  // speculative drafts at one position.
  SampleResult sample(std::span<const float> logits, const SamplingParams& params,
                      const PenaltyState& penalties, uint64_t position, uint32_t draft_slot);

  // The same without penalties, returning only the token.
  int32_t sample(std::span<const float> logits, const SamplingParams& params, uint64_t position,
                 uint32_t draft_slot = 0);

  // The distribution sample() draws from, as probabilities over the row (probs.size() ==
  // logits.size()): the kept tokens' fixed-point weights over the kept mass, 0 elsewhere; at
  // temperature 0 (or with nothing surviving) a point mass on the token sample() returns.
  // Speculative sampling needs it (rejection_sampling.h).
  void distribution(std::span<const float> logits, const SamplingParams& params,
                    const PenaltyState& penalties, std::span<float> probs);

  // What sample() returns when its draw lands on token_id (the token and, with params.logprobs,
  // its log-probabilities), without drawing. token_id should be one sample() can return.
  SampleResult score(std::span<const float> logits, const SamplingParams& params,
                     const PenaltyState& penalties, int32_t token_id);

 private:
  // A rank-order prefix of the survivors: every survivor in a bucket above last_bucket, then the
  // first n_in_last tokens (rank order) of last_bucket, whose weights sum to mass_in_last.
  struct Prefix {
    int last_bucket = 0;
    int64_t n_in_last = 0;
    uint64_t mass_in_last = 0;
    int64_t n_tokens = 0;
    uint64_t mass = 0;
  };

  // Weights, the bucket histogram, survivor count and mass of a processed row.
  void compute_weights(std::span<const float> processed, float temperature);
  // The survivors of bucket b in rank order (collected and sorted on first use in this call). The
  // span is valid until the next call that collects another bucket.
  std::span<const int32_t> bucket_tokens(int b);
  // Collects every not-yet-collected bucket in [lo, hi] in one pass over the vocabulary.
  void collect_buckets(int lo, int hi);
  Prefix all_survivors() const;
  Prefix top_k_prefix(int64_t k);
  Prefix truncate(const Prefix& candidates, const SamplingParams& params);
  // Bias, penalties, weights and the kept prefix of a row at temperature > 0 (row_ is set; the
  // caller clears it). Returns the processed row; n_survivors_ == 0 means nothing can be drawn.
  std::span<const float> prepare(std::span<const float> logits, const SamplingParams& params,
                                 const PenaltyState& penalties, Prefix& kept);
  int32_t draw(const Prefix& kept, uint64_t target);
  void fill_logprobs(std::span<const float> raw, std::span<const float> processed,
                     const SamplingParams& params, const Prefix* kept, SampleResult& result);

  std::vector<float> processed_;  // [vocab] logits after bias and penalties (when there are any)
  // The row being sampled (processed_ or the caller's logits) and T, for rank order; only set
  // during a call to sample().
  std::span<const float> row_;
  float temperature_ = 1.0f;
  std::vector<float> weights_;  // [vocab] w = expf(z - z_max); 0 for non-survivors
  std::array<uint64_t, sampling_rule::kWeightBuckets> bucket_mass_{};  // Σ fixed_weight per bucket
  std::array<int64_t, sampling_rule::kWeightBuckets> bucket_count_{};  // survivors per bucket
  Isa isa_;
  const SamplerLoops* loops_;
  std::array<int32_t, sampling_rule::kWeightBuckets> bucket_slot_{};  // index into ranges_, or -1
  // compute_weights' scratch: the histogram over even and odd token ids.
  std::array<std::array<uint64_t, sampling_rule::kWeightBuckets>, 2> half_mass_{};
  std::array<std::array<int64_t, sampling_rule::kWeightBuckets>, 2> half_count_{};
  struct Range {
    int bucket;
    size_t begin, end;  // in collected_
  };
  std::vector<Range> ranges_;       // buckets collected in this call
  std::vector<int32_t> collected_;  // their tokens, each bucket's range in rank order
  std::vector<int32_t> listed_;     // survivors in buckets >= kListedBucket, in id order
  int64_t n_survivors_ = 0;
  uint64_t survivor_mass_ = 0;
  PenaltyState no_penalties_;
};

}  // namespace ds
