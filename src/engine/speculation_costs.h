// measure_speculation_costs: the cost curve SpeculationPolicy decides with, measured on the model
// itself when the engine starts (docs/speculative.md, "Turning speculation down").
//
// For B sequences (1, 2, 4, ... up to max_seqs) of r rows each (r = 1 .. k_max + 1) it times the
// target forward as a step would run it (r = 1: a plain decode row; r > 1: a verify chunk, every
// row's logits and hidden state) and forward_mtp over the same rows; each point is the fastest of a
// few repetitions (the host may be shared). Rows are written into blocks [0, max_seqs) of the
// fresh cache, which no sequence owns yet and every later writer overwrites before reading.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/speculation_policy.h"
#include "model/model_runner.h"

namespace ds {

struct SpeculationCosts {
  std::vector<CostPoint> target;  // ns per target forward, by total rows
  std::vector<CostPoint> draft;   // ns per forward_mtp, by total rows
};

// Preconditions: its KV cache initialised with at least max_seqs blocks of at least k_max + 1
// tokens (and max_seqs state slots where the model has them), nothing cached in them yet. The draft
// curve is measured only for a model that drafts with forward_mtp (supports_mtp_drafting); it is
// empty otherwise (DSpark's confidence scheduling needs the target's curve only).
// draft_vocab: time forward_mtp with MtpRequest::draft_vocab (the drafter's head).
Result<SpeculationCosts> measure_speculation_costs(ModelRunner& model, int32_t max_seqs, int32_t k_max,
                                                   bool draft_vocab);

}  // namespace ds
