// A checkpoint's block drafter (DSpark, docs/dspark.md): the seam between a model that ships a
// parallel draft head and whoever drives it (deepinfer logits today, the engine's drafter next).
//
// The target forward gives, as LogitsOutput::hidden, the drafter's context feature of each of its
// hidden rows. The caller feeds the features of the positions it keeps (extend), then asks for
// draft blocks: one block of block_size() rows per sequence, [anchor, noise, ...] at positions
// p .. p + block_size() − 1, p = the number of positions fed. Row j's base logits plus the Markov
// bias of the token before it (the anchor for j = 0, the previous draft after) give the
// distribution of the draft for position p + 1 + j; the confidence of that row estimates the
// chance the draft is accepted once the ones before it were.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "model/kv_cache.h"
#include "tensor/tensor.h"

namespace ds {

struct DraftBlockRequest {
  SequenceState* seq = nullptr;  // its state slot holds the drafter's context
  int32_t anchor = 0;            // the last token the target emitted (not yet run by it)
  int64_t pos = 0;               // the anchor's position: every position below it has been fed
};

struct DraftBlockOutput {
  TensorF32 hidden;  // [n_requests · block_size, hidden_size] the drafter's final rows
  TensorF32 logits;  // [n_requests · block_size, vocab] their base logits (shared head)
};

class DraftBlockModel {
 public:
  virtual ~DraftBlockModel() = default;
  virtual int block_size() const = 0;
  // The positions fed for the sequence's state slot (0 for a slot that holds no context).
  virtual int64_t fed(const SequenceState& seq) const = 0;
  // Feeds the context features of positions [pos, pos + n) (LogitsOutput::hidden rows, n × hidden
  // floats). A pos other than the number fed so far starts the sequence's context over at pos.
  virtual Status extend(SequenceState& seq, int64_t pos, std::span<const float> features) = 0;
  // model_bad_input when a request's pos is not the number of positions fed for its sequence.
  virtual Status draft(std::span<const DraftBlockRequest> requests, DraftBlockOutput& out) = 0;
  // logits [vocab] += the Markov bias after token `prev`.
  virtual void add_markov_bias(int32_t prev, std::span<float> logits) = 0;
  // The confidence of a final row h [hidden] whose previous token is `prev`, in (0, 1).
  virtual float confidence(std::span<const float> h, int32_t prev) const = 0;
};

}  // namespace ds
