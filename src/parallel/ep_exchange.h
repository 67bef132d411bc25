// Expert parallelism over MPI: the ExpertExchange (model/expert_exchange.h) that sends each routed
// choice to the rank owning its expert and brings the output back (docs/expert-parallel.md).
//
// One MoE layer = two MPI_Alltoallv in a fixed order: dispatch (records {expert, weight, row}
// grouped by destination rank, ascending choice index within a rank) and combine (the outputs in
// the same record order). The owner groups what it received by expert and runs each expert once
// over all of them; matmul rows are batch invariant, so an output does not depend on which other
// rows (of this rank or another) were grouped with it, and the caller combines in ascending expert
// id: logits equal the single-process ones bit for bit, whatever the other ranks run.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "model/expert_exchange.h"
#include "model/moe_dispatch.h"
#include "parallel/expert_placement.h"
#include "parallel/mpi_comm.h"

namespace ds {

// Counters since construction: what /metrics and the bench report per rank.
struct EpStats {
  int64_t exchanges = 0;                       // MoE layer calls
  int64_t rows_sent = 0;                       // routed choices this rank sent out (to itself included)
  int64_t bytes_sent = 0, bytes_received = 0;  // both all-to-alls, this rank's side
  double alltoall_seconds = 0;                 // wall time inside the MPI collectives
  std::vector<int64_t> expert_rows;            // [n_experts] rows each expert computed here, all layers
  // [layer][n_experts] the same per model layer; empty for a layer that never ran here.
  std::vector<std::vector<int64_t>> layer_expert_rows;
};

class MpiExpertExchange final : public ExpertExchange {
 public:
  // `comm` must outlive the exchange; placement.n_ranks == comm.size(). Every layer starts with
  // `placement`; live EPLB may give each its own (set_placement).
  static Result<MpiExpertExchange> create(const MpiComm& comm, ExpertPlacement placement);

  bool owns_expert(int32_t layer, int32_t expert) const override;
  void run(const RoutedChoices& in, const LocalExpertRunner& run_local, float* y_choice) override;

  // The first failure of any run(); after one, run() does no MPI and returns NaN outputs.
  const Status& status() const { return status_; }
  const EpStats& stats() const { return stats_; }
  // The placement layer `layer` routes by.
  const ExpertPlacement& placement(int32_t layer) const;
  // The experts this rank holds in any layer that has run here (before any, the start placement's).
  std::vector<int32_t> local_experts() const;
  // Live EPLB, between forwards on every rank alike: layer `layer` routes by `next` from now on
  // (same experts and ranks; the caller has moved the weights first).
  Status set_placement(int32_t layer, ExpertPlacement next);

 private:
  MpiExpertExchange(const MpiComm& comm, ExpertPlacement placement);
  Status exchange(const RoutedChoices& in, const LocalExpertRunner& run_local, float* y_choice);
  Status alltoallv(const std::vector<char>& send, const std::vector<int>& send_bytes, std::vector<char>& recv,
                   const std::vector<int>& recv_bytes);

  const MpiComm* comm_;
  ExpertPlacement placement_;                                    // every layer's at start
  std::vector<std::optional<ExpertPlacement>> layer_placement_;  // [layer] set by live EPLB
  Status status_;
  EpStats stats_;
  // Reused buffers (one forward at a time).
  std::vector<int> send_records_, recv_records_;
  std::vector<int64_t> send_order_;  // [n_choices] choice of each send record
  std::vector<int32_t> dest_;        // [n_choices] the rank computing each choice
  std::vector<char> send_buf_, recv_buf_;
  std::vector<int32_t> recv_expert_;
  MoeDispatchScratch groups_;
};

}  // namespace ds
