// ScriptedOutputRunner: a ModelRunner decorator for testing the serving path's response side
// (output parser, stream builders, client SDKs) with outputs a random-weight model never produces:
// thinking, content, DSML tool calls. It runs the real model's forward, then, on each logits row,
// adds a large bias to the one token a script says comes next, so greedy (and any temperature up
// to ~100) decoding emits the script. The model math is tested elsewhere; this tests what the
// server does with a given token sequence.
//
// A script is a token sequence that begins with an anchor: the end of the prompt it answers (e.g.
// "<｜Assistant｜><think>" or "...in Paris?<｜Assistant｜></think>"), followed by the output, and
// ends with EOS. For a logits row after the sequence s[0..p], the runner takes, over all scripts,
// the longest suffix of s[0..p] that is a proper prefix of a script (KMP over the last few tokens);
// if it is non-empty, the script's next token is forced. The key is the sequence itself, read back
// from a shadow copy of the paged token positions (written into the same block ids as the KV rows),
// so the position stays right under batching, chunked prefill, preemption and prefix-cache hits
// (a shared block holds the same tokens for every sequence that names it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace ds::testing {

using OutputScript = std::vector<int32_t>;

// Scripts from JSON text: an array of strings (or {"scripts": [...]}); each string is tokenized
// with special-token parsing on (template markers written in it become their ids), and EOS is
// appended when it does not end with it. invalid_argument naming `source` for anything else, an
// empty string, or a script without a token besides EOS.
Result<std::vector<OutputScript>> parse_output_scripts(std::string_view json_text, const Tokenizer& tokenizer,
                                                       const std::string& source);
// The same, read from a file (io_error when unreadable).
Result<std::vector<OutputScript>> load_output_scripts(const std::string& path, const Tokenizer& tokenizer);

// The token a script forces after `sequence` (all tokens so far, or at least the last
// max-script-length of them), or nullopt when no non-empty suffix is a proper prefix of a script.
// Ties between scripts go to the first in the list.
std::optional<int32_t> scripted_next_token(std::span<const int32_t> sequence,
                                           std::span<const OutputScript> scripts);

class ScriptedOutputRunner final : public ModelRunner {
 public:
  // bias_margin: the forced token's logit becomes (row max) + bias_margin.
  ScriptedOutputRunner(std::unique_ptr<ModelRunner> inner, std::vector<OutputScript> scripts,
                       float bias_margin = 1000.0f);

  const ModelConfig& config() const override { return inner_->config(); }
  KvCacheLayout kv_cache_layout() const override;
  Status init_kv_cache(const KvCacheConfig& cfg) override;
  const KvCacheConfig& kv_cache_config() const override { return inner_->kv_cache_config(); }
  Status forward(std::span<const ForwardRequest> requests, LogitsOutput& out) override;
  bool has_mtp() const override { return inner_->has_mtp(); }
  Status forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) override {
    return inner_->forward_mtp(requests, out);
  }

  // Rows whose token was forced so far (for tests and the serve log).
  int64_t n_forced_rows() const { return n_forced_rows_; }

 private:
  int32_t& shadow_cell(const SequenceState& seq, int64_t position);

  std::unique_ptr<ModelRunner> inner_;
  std::vector<OutputScript> scripts_;
  float bias_margin_;
  size_t max_script_len_ = 0;
  // [n_blocks, block_size] token ids at the positions the KV rows of the same cells hold.
  std::vector<int32_t> shadow_tokens_;
  int64_t n_forced_rows_ = 0;
};

}  // namespace ds::testing
