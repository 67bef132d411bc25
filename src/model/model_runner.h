// The interface the engine drives: one forward pass over chunks of several sequences at once
// (rows concatenated for the GEMMs, attention per sequence), plus the MTP head's forward.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/kv_cache.h"
#include "tensor/tensor.h"
#include "weights/model_config.h"

namespace ds {

// One sequence's next chunk: `tokens` go to positions seq->n_tokens(), seq->n_tokens() + 1, ...
struct ForwardRequest {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;
  bool all_logits = false;  // logits for every token of the chunk, else only for the last
};

// One sequence's MTP chunk: row i pairs the main model's hidden state at position
// seq->n_mtp_tokens() + i with the token that followed it (numerics.md, MTP).
struct MtpRequest {
  SequenceState* seq = nullptr;
  std::span<const int32_t> next_tokens;  // [n]
  const float* hidden = nullptr;         // [n, hidden_size], from LogitsOutput::hidden
};

struct LogitsOutput {
  TensorF32 logits;  // [n_out_rows, vocab]
  // [n_out_rows, hidden_size]: the MTP input for the same rows (after the final norm by default;
  // ModelOptions::mtp_input). Filled by forward(), left alone by forward_mtp().
  TensorF32 hidden;
  // Request r owns output rows [row_begin[r], row_begin[r + 1]) (size n_requests + 1).
  std::vector<int64_t> row_begin;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelConfig& config() const = 0;
  // A fresh, empty sequence sized for this model.
  virtual std::unique_ptr<SequenceState> new_sequence() const = 0;

  // Runs every request's chunk in one pass and appends the chunks to their caches. Validates all
  // requests first (model_bad_input for an empty chunk, a token id out of range, a sequence over
  // max_seq_len, or a sequence named twice) and then changes nothing on error.
  // Not re-entrant: one forward at a time per model (scratch buffers are reused).
  virtual Status forward(std::span<const ForwardRequest> requests, LogitsOutput& out) = 0;

  virtual bool has_mtp() const = 0;
  // MTP logits for every row of every request (model_unsupported without an MTP layer).
  virtual Status forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) = 0;
};

}  // namespace ds
