#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/assert.h"
#include "sampling/logits_processors.h"
#include "sampling/philox.h"
#include "sampling/sampler_loops.h"

namespace ds {

namespace rule = sampling_rule;

Sampler::Sampler(Isa isa) : isa_(isa), loops_(&sampler_loops(isa)) { bucket_slot_.fill(-1); }

int32_t argmax(std::span<const float> logits) {
  // A vectorised max, then the first index holding it (ties to the lower index).
  const float best = rule::max_value(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == best) return static_cast<int32_t>(i);  // never NaN: best is a value of the row or -inf
  }
  return 0;  // empty or all NaN
}

void Sampler::compute_weights(std::span<const float> processed, float temperature) {
  const size_t vocab = processed.size();
  weights_.resize(vocab);
  // Division by T > 0 and the sanitising clamp are monotone, so z_max = scaled(max l) exactly and z
  // never needs storing. max and exp vectorise; the histogram below cannot.
  const float z_max = rule::scaled_logit(rule::max_value(processed), temperature);
  bucket_mass_.fill(0);
  bucket_count_.fill(0);
  for (const Range& r : ranges_) bucket_slot_[static_cast<size_t>(r.bucket)] = -1;
  ranges_.clear();
  collected_.clear();
  listed_.clear();
  n_survivors_ = 0;
  survivor_mass_ = 0;
  if (z_max == -INFINITY) return;
  // w[i] = weight(scaled_logit(l[i], T), z_max) over the row: the sampler's hottest loop, 8 / 16
  // wide on AVX2 / AVX-512 (sampler_loops.h: every path computes the same floats).
  loops_->weights_of_row(processed.data(), weights_.data(), vocab, temperature, z_max);
  // Histogram into two interleaved copies (even and odd ids), so that runs of tokens in the same
  // bucket do not serialise on one counter; non-survivors (w = 0) land in bucket 0. Tokens of the
  // top buckets are also listed (a rarely taken branch on a peaked row).
  for (auto& h : half_mass_) h.fill(0);
  for (auto& h : half_count_) h.fill(0);
  size_t i = 0;
  for (; i + 2 <= vocab; i += 2) {
    for (size_t half = 0; half < 2; ++half) {
      const float w = weights_[i + half];
      const size_t b = static_cast<size_t>(rule::weight_bucket(w));
      half_mass_[half][b] += rule::fixed_weight(w);
      ++half_count_[half][b];
      if (b >= rule::kListedBucket) listed_.push_back(static_cast<int32_t>(i + half));
    }
  }
  if (i < vocab) {
    const size_t b = static_cast<size_t>(rule::weight_bucket(weights_[i]));
    half_mass_[0][b] += rule::fixed_weight(weights_[i]);
    ++half_count_[0][b];
    if (b >= rule::kListedBucket) listed_.push_back(static_cast<int32_t>(i));
  }
  for (size_t b = 1; b < rule::kMinSurvivorBucket; ++b) {
    DS_ASSERT(half_count_[0][b] + half_count_[1][b] == 0, "survivor weights must be normal floats");
  }
  uint64_t mass = 0;
  int64_t n_survivors = 0;
  for (size_t b = rule::kMinSurvivorBucket; b < rule::kWeightBuckets; ++b) {
    bucket_mass_[b] = half_mass_[0][b] + half_mass_[1][b];
    bucket_count_[b] = half_count_[0][b] + half_count_[1][b];
    mass += bucket_mass_[b];
    n_survivors += bucket_count_[b];
  }
  n_survivors_ = n_survivors;
  survivor_mass_ = mass;
}

void Sampler::collect_buckets(int lo, int hi) {
  const size_t start = collected_.size();
  lo = std::max(lo, rule::kMinSurvivorBucket);  // excludes the non-survivors' bucket 0
  if (hi < lo) return;
  const uint32_t span = static_cast<uint32_t>(hi - lo);
  const auto consider = [&](size_t i) {
    // One unsigned compare tests lo <= b <= hi; taken rarely, so the scan runs at load speed.
    const uint32_t offset = static_cast<uint32_t>(rule::weight_bucket(weights_[i]) - lo);
    if (offset <= span && bucket_slot_[static_cast<size_t>(lo) + offset] < 0) {
      collected_.push_back(static_cast<int32_t>(i));
    }
  };
  if (lo >= rule::kListedBucket) {
    for (const int32_t id : listed_) consider(static_cast<size_t>(id));
  } else {
    for (size_t i = 0; i < weights_.size(); ++i) consider(i);
  }
  // Rank order sorts by bucket first (a higher bucket outranks every token of a lower one), so each
  // bucket's tokens end up contiguous.
  std::sort(collected_.begin() + static_cast<std::ptrdiff_t>(start), collected_.end(),
            rule::RankLess{weights_, row_, temperature_});
  for (size_t begin = start; begin < collected_.size();) {
    const int b = rule::weight_bucket(weights_[static_cast<size_t>(collected_[begin])]);
    size_t end = begin + 1;
    while (end < collected_.size() &&
           rule::weight_bucket(weights_[static_cast<size_t>(collected_[end])]) == b)
      ++end;
    bucket_slot_[static_cast<size_t>(b)] = static_cast<int32_t>(ranges_.size());
    ranges_.push_back({b, begin, end});
    begin = end;
  }
}

std::span<const int32_t> Sampler::bucket_tokens(int b) {
  if (bucket_count_[static_cast<size_t>(b)] == 0) return {};
  if (bucket_slot_[static_cast<size_t>(b)] < 0) collect_buckets(b, b);
  const Range& r = ranges_[static_cast<size_t>(bucket_slot_[static_cast<size_t>(b)])];
  DS_ASSERT(static_cast<int64_t>(r.end - r.begin) == bucket_count_[static_cast<size_t>(b)],
            "a collected bucket must hold exactly its histogram count");
  return {collected_.data() + r.begin, r.end - r.begin};
}

Sampler::Prefix Sampler::all_survivors() const {
  int lowest = 0;
  while (bucket_count_[static_cast<size_t>(lowest)] == 0) ++lowest;  // n_survivors_ > 0
  return {lowest, bucket_count_[static_cast<size_t>(lowest)], bucket_mass_[static_cast<size_t>(lowest)],
          n_survivors_, survivor_mass_};
}

Sampler::Prefix Sampler::top_k_prefix(int64_t k) {
  int64_t n_above = 0;
  uint64_t mass_above = 0;
  for (int b = rule::kWeightBuckets - 1; b >= 0; --b) {
    const int64_t count = bucket_count_[static_cast<size_t>(b)];
    if (n_above + count < k) {
      n_above += count;
      mass_above += bucket_mass_[static_cast<size_t>(b)];
      continue;
    }
    const std::span<const int32_t> tokens = bucket_tokens(b);
    const int64_t n_in = k - n_above;
    uint64_t mass_in = 0;
    for (int64_t j = 0; j < n_in; ++j)
      mass_in += rule::fixed_weight(weights_[static_cast<size_t>(tokens[j])]);
    return {b, n_in, mass_in, k, mass_above + mass_in};
  }
  return all_survivors();  // k >= survivors; callers only ask for fewer
}

Sampler::Prefix Sampler::truncate(const Prefix& candidates, const SamplingParams& params) {
  const bool use_top_p = params.top_p < 1.0f;
  const double top_p_mass = use_top_p ? static_cast<double>(candidates.mass) * params.top_p : INFINITY;
  // Buckets above min-p's bucket pass min-p whole, buckets below fail it whole.
  const int min_p_bucket = params.min_p > 0.0f ? rule::weight_bucket(params.min_p) : -1;
  uint64_t mass_before = 0;
  int64_t n_kept = 0;
  for (int b = rule::kWeightBuckets - 1; b >= candidates.last_bucket; --b) {
    const bool is_last = b == candidates.last_bucket;
    const int64_t count = is_last ? candidates.n_in_last : bucket_count_[static_cast<size_t>(b)];
    if (count == 0) continue;
    const uint64_t mass = is_last ? candidates.mass_in_last : bucket_mass_[static_cast<size_t>(b)];
    // Whole bucket kept when even its last token has mass before it below the top-p threshold.
    if (b > min_p_bucket && rule::below_top_p(mass_before + mass, top_p_mass)) {
      mass_before += mass;
      n_kept += count;
      continue;
    }
    const std::span<const int32_t> tokens = bucket_tokens(b);
    uint64_t mass_in = 0;
    int64_t j = 0;
    for (; j < count; ++j) {
      const float w = weights_[static_cast<size_t>(tokens[j])];
      if (!rule::below_top_p(mass_before, top_p_mass) || w < params.min_p) break;
      mass_before += rule::fixed_weight(w);
      mass_in += rule::fixed_weight(w);
    }
    n_kept += j;
    if (j < count) return {b, j, mass_in, n_kept, mass_before};
  }
  return candidates;
}

int32_t Sampler::draw(const Prefix& kept, uint64_t target) {
  uint64_t running = 0;
  for (int b = rule::kWeightBuckets - 1; b >= kept.last_bucket; --b) {
    const bool is_last = b == kept.last_bucket;
    const int64_t count = is_last ? kept.n_in_last : bucket_count_[static_cast<size_t>(b)];
    if (count == 0) continue;
    const uint64_t mass = is_last ? kept.mass_in_last : bucket_mass_[static_cast<size_t>(b)];
    if (running + mass <= target) {
      running += mass;
      continue;
    }
    const std::span<const int32_t> tokens = bucket_tokens(b);
    for (int64_t j = 0; j < count; ++j) {
      running += rule::fixed_weight(weights_[static_cast<size_t>(tokens[j])]);
      if (running > target) return tokens[j];
    }
  }
  DS_ASSERT(false, "the draw target must lie below the kept mass");
  return 0;
}

std::span<const float> Sampler::prepare(std::span<const float> logits, const SamplingParams& params,
                                        const PenaltyState& penalties, Prefix& kept) {
  std::span<const float> processed = logits;
  if (has_logit_edits(params, penalties)) {
    processed_.assign(logits.begin(), logits.end());
    apply_bias_and_penalties(processed_, params, penalties);
    processed = processed_;
  }
  if (params.is_greedy()) return processed;
  row_ = processed;
  temperature_ = params.temperature;
  compute_weights(processed, params.temperature);
  if (n_survivors_ == 0) return processed;
  const Prefix candidates =
      params.top_k > 0 && params.top_k < n_survivors_ ? top_k_prefix(params.top_k) : all_survivors();
  kept = params.top_p < 1.0f || params.min_p > 0.0f ? truncate(candidates, params) : candidates;
  return processed;
}

SampleResult Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                             const PenaltyState& penalties, uint64_t position, uint32_t draft_slot) {
  DS_ASSERT(!logits.empty(), "sampling needs a non-empty logits row");
  DS_ASSERT(logits.size() <= rule::kMaxVocab, "vocabulary too large for 64-bit fixed-point masses");
  Prefix kept;
  const std::span<const float> processed = prepare(logits, params, penalties, kept);
  SampleResult result;
  if (params.is_greedy()) {
    result.token_id = argmax(processed);
    if (params.logprobs) fill_logprobs(logits, processed, params, nullptr, result);
    return result;
  }
  if (n_survivors_ == 0) {  // every processed logit is -inf or NaN: nothing can be drawn
    row_ = {};
    result.token_id = 0;
    if (params.logprobs) fill_logprobs(logits, processed, params, nullptr, result);
    return result;
  }
  const double u = philox_uniform(params.seed, position, draft_slot);
  result.token_id = draw(kept, rule::draw_target(u, kept.mass));
  if (params.logprobs) fill_logprobs(logits, processed, params, &kept, result);
  row_ = {};  // may point at the caller's logits: never kept past the call
  return result;
}

void Sampler::distribution(std::span<const float> logits, const SamplingParams& params,
                           const PenaltyState& penalties, std::span<float> probs) {
  DS_ASSERT(probs.size() == logits.size(), "distribution: probs must have one entry per logit");
  DS_ASSERT(!logits.empty() && logits.size() <= rule::kMaxVocab, "distribution: bad vocabulary size");
  std::fill(probs.begin(), probs.end(), 0.0f);
  Prefix kept;
  const std::span<const float> processed = prepare(logits, params, penalties, kept);
  if (params.is_greedy() || n_survivors_ == 0) {
    probs[static_cast<size_t>(params.is_greedy() ? argmax(processed) : 0)] = 1.0f;
    row_ = {};
    return;
  }
  const double inv_mass = 1.0 / static_cast<double>(kept.mass);
  // Every survivor of a bucket above the last kept one is kept; of the last bucket, its first
  // n_in_last tokens in rank order.
  for (size_t i = 0; i < weights_.size(); ++i) {
    const float w = weights_[i];
    if (w > 0.0f && rule::weight_bucket(w) > kept.last_bucket)
      probs[i] = static_cast<float>(static_cast<double>(rule::fixed_weight(w)) * inv_mass);
  }
  const std::span<const int32_t> last = bucket_tokens(kept.last_bucket);
  for (int64_t j = 0; j < kept.n_in_last; ++j) {
    const size_t id = static_cast<size_t>(last[static_cast<size_t>(j)]);
    probs[id] = static_cast<float>(static_cast<double>(rule::fixed_weight(weights_[id])) * inv_mass);
  }
  row_ = {};
}

SampleResult Sampler::score(std::span<const float> logits, const SamplingParams& params,
                            const PenaltyState& penalties, int32_t token_id) {
  SampleResult result;
  result.token_id = token_id;
  if (!params.logprobs) return result;
  Prefix kept;
  const std::span<const float> processed = prepare(logits, params, penalties, kept);
  const bool drawn = !params.is_greedy() && n_survivors_ > 0;
  fill_logprobs(logits, processed, params, drawn ? &kept : nullptr, result);
  row_ = {};
  return result;
}

int32_t Sampler::sample(std::span<const float> logits, const SamplingParams& params, uint64_t position,
                        uint32_t draft_slot) {
  return sample(logits, params, no_penalties_, position, draft_slot).token_id;
}

void Sampler::fill_logprobs(std::span<const float> raw, std::span<const float> processed,
                            const SamplingParams& params, const Prefix* kept, SampleResult& result) {
  const int n_top = params.top_logprobs;
  if (params.logprobs_mode == LogprobsMode::raw || params.is_greedy()) {
    // log_softmax of a full row: the raw logits, or at temperature 0 the biased and penalised ones.
    const std::span<const float> row = params.logprobs_mode == LogprobsMode::raw ? raw : processed;
    const double lse = log_sum_exp(isa_, row);
    const auto logprob_of = [lse](float l) {
      return static_cast<float>(static_cast<double>(std::min(l, std::numeric_limits<float>::max())) - lse);
    };
    const float l_chosen = row[static_cast<size_t>(result.token_id)];
    result.logprob = std::isnan(l_chosen) ? -INFINITY : logprob_of(l_chosen);
    result.n_top = select_top_n(row, n_top, result.top);
    for (int i = 0; i < result.n_top; ++i) {
      TokenLogprob& t = result.top[static_cast<size_t>(i)];
      t.logprob = logprob_of(t.logprob);
    }
    return;
  }
  if (kept == nullptr) {  // nothing survived: the drawn distribution is empty
    result.logprob = -INFINITY;
    result.n_top = 0;
    return;
  }
  // Processed: log(w / kept mass); the kept prefix in rank order is the distribution's order.
  const double log_mass = std::log(static_cast<double>(kept->mass));
  const auto logprob_of = [&](int32_t id) {
    return static_cast<float>(
        std::log(static_cast<double>(rule::fixed_weight(weights_[static_cast<size_t>(id)]))) - log_mass);
  };
  result.logprob = logprob_of(result.token_id);
  result.n_top = static_cast<int32_t>(std::min<int64_t>(n_top, kept->n_tokens));
  if (result.n_top == 0) return;
  // One pass collects every bucket the top entries come from.
  int lo = rule::kWeightBuckets - 1;
  for (int64_t count = 0; lo > kept->last_bucket; --lo) {
    count += bucket_count_[static_cast<size_t>(lo)];
    if (count >= result.n_top) break;
  }
  collect_buckets(lo, rule::kWeightBuckets - 1);
  int filled = 0;
  for (int b = rule::kWeightBuckets - 1; b >= lo && filled < result.n_top; --b) {
    for (const int32_t id : bucket_tokens(b)) {
      if (filled == result.n_top) break;
      result.top[static_cast<size_t>(filled++)] = {id, logprob_of(id)};
    }
  }
  DS_ASSERT(filled == result.n_top, "the kept prefix must hold n_top tokens");
}

}  // namespace ds
