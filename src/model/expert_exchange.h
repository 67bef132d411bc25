// The seam between a MoE layer and wherever its routed experts run (docs/expert-parallel.md).
// A MoE layer routes its rows, then hands every (row, expert, weight) choice to
// run_routed_experts (moe_dispatch.h): in one process the experts run here; with an
// ExpertExchange (expert parallelism, src/parallel) each choice travels to the rank that owns
// its expert and its output comes back. The layer then combines the outputs itself, in a fixed
// order, so a row's result never depends on where or with which other rows its experts ran.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

namespace ds {

// The rows of one expert, gathered contiguously: y [n_rows, hidden] = expert(x [n_rows, hidden]),
// weight [n_rows] the rows' combine weights (a model may fold them into the expert, as V4 does).
struct ExpertRows {
  int32_t expert = 0;
  const float* x = nullptr;
  const float* weight = nullptr;
  int64_t n_rows = 0;
  float* y = nullptr;
};

// Runs a batch of expert groups on this process's experts. Called exactly once per MoE forward
// (also with no groups), so a model may fold per-forward work (V4's shared expert) into the call.
using LocalExpertRunner = std::function<void(std::span<const ExpertRows>)>;

// The routed choices of one MoE forward: choice c belongs to row c / top_k.
struct RoutedChoices {
  const float* x = nullptr;  // [n_rows, hidden]
  int64_t n_rows = 0;
  int64_t top_k = 0;
  int64_t hidden = 0;
  const int32_t* expert = nullptr;  // [n_rows · top_k]
  const float* weight = nullptr;    // [n_rows · top_k]
  // The model layer (checkpoint index; MTP layers follow the main ones) of this MoE call: expert
  // parallelism places every layer's experts on its own.
  int32_t layer = 0;
};

// Implemented by the expert-parallel runtime (src/parallel/ep_exchange.h). Every rank calls run()
// at every MoE layer in the same order (with n_rows == 0 when it has no rows), which is what makes
// it a collective. A failure is sticky: run() leaves y_choice as NaN and status() reports it; the
// caller checks status() after the forward (MoE forwards return nothing).
class ExpertExchange {
 public:
  virtual ~ExpertExchange() = default;
  // Whether this rank holds layer `layer`'s expert `expert` (the others are not loaded).
  virtual bool owns_expert(int32_t layer, int32_t expert) const = 0;
  // y_choice: [n_rows · top_k, hidden], the output of choice c's expert on its row.
  virtual void run(const RoutedChoices& in, const LocalExpertRunner& run_local, float* y_choice) = 0;
};

}  // namespace ds
