// Live EPLB (docs/expert-parallel.md): every `interval_steps` forward steps the ranks sum the rows
// each expert of each MoE layer computed over a moving window, run EPLB per layer on that load,
// and for every layer whose new placement serves it with a clearly lower rank imbalance move the
// expert weights it needs between ranks (one MPI_Alltoallv per changed layer, copies taken from the
// lowest old holder), drop the copies no longer placed here, and switch that layer's placement. All between
// two forwards, on every rank at the same step, from the same summed counts, so every rank takes the same
// decision; no request is paused or dropped, and since copies hold the same bytes, no result changes.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "base/status.h"
#include "model/routed_expert_set.h"
#include "parallel/ep_exchange.h"
#include "parallel/eplb.h"
#include "parallel/mpi_comm.h"

namespace ds {

struct LiveEplbOptions {
  int64_t interval_steps = 0;  // forward steps between checks; 0 = off
  int window_intervals = 4;    // the load is summed over the last this-many intervals
  double min_gain = 0.05;      // apply only when max/mean falls by at least this fraction
  EplbShape shape;             // n_physical = experts + redundant copies, groups, nodes, ranks
};

// Counters since start (this rank's side; the decisions are the same on every rank).
struct LiveEplbStats {
  int64_t checks = 0;             // windows looked at
  int64_t rebalances = 0;         // checks that applied new placements
  int64_t layers_rebalanced = 0;  // layer placements changed by them
  int64_t experts_received = 0;   // expert copies (x MoE layers) this rank loaded from others
  int64_t bytes_received = 0;     // their weight bytes
  int64_t experts_dropped = 0;    // copies (x layers) freed here
  double seconds = 0;             // inside checks and moves, of which:
  double pack_seconds = 0;        //   copying the copies to send into the transfer buffer
  double transfer_seconds = 0;    //   in MPI (counts and weights), waits for the other ranks included
  double install_seconds = 0;     //   parsing and installing what arrived
  // At the last check, over the MoE layers: Σ max / Σ mean of the ranks' load in the window (each
  // layer's max/mean weighted by its load), with the placements in use, and with EPLB's (applied or not).
  double imbalance_before = 1.0;
  double imbalance_after = 1.0;
};

class LiveEplb {
 public:
  // invalid_argument for interval_steps < 1, window_intervals < 1, min_gain outside [0, 1) or a
  // shape EPLB cannot place.
  static Result<LiveEplb> create(const LiveEplbOptions& options, int64_t n_experts);

  // Call once per forward step on every rank (the same count everywhere), between forwards: a
  // collective when a check is due. `layers`: the model's MoE layers (ModelRunner::
  // routed_expert_sets), the same list on every rank. An MPI failure is returned (the deployment is
  // then broken, as for a failed exchange); a placement is switched only once every rank has all
  // the weights it needs.
  Status after_step(const MpiComm& comm, MpiExpertExchange& exchange,
                    std::span<RoutedExpertSet* const> layers);

  const LiveEplbStats& stats() const { return stats_; }
  const LiveEplbOptions& options() const { return options_; }

 private:
  // A layer's new placement: layers[index] routes by `next` once the weights have moved.
  struct LayerChange {
    size_t index = 0;
    ExpertPlacement next;
  };
  explicit LiveEplb(const LiveEplbOptions& options, int64_t n_experts);
  Status check(const MpiComm& comm, MpiExpertExchange& exchange, std::span<RoutedExpertSet* const> layers);
  // Sends and loads the copies every change needs (from the exchange's current placements). An MPI
  // failure is returned; a copy some rank could not load (on any rank) is reported in
  // `load_failure` on every rank.
  Status move_experts(const MpiComm& comm, const MpiExpertExchange& exchange,
                      std::span<const LayerChange> changes, std::span<RoutedExpertSet* const> layers,
                      Status& load_failure);

  LiveEplbOptions options_;
  int64_t n_experts_ = 0;
  int64_t steps_ = 0;
  std::vector<int64_t> rows_at_last_check_;  // [layers · experts] this rank's EpStats::layer_expert_rows
  std::deque<std::vector<int64_t>> window_;  // per interval: [layers · experts] rows summed over ranks
  LiveEplbStats stats_;
};

}  // namespace ds
