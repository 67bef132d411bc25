// `--expert-parallel` for the CLI commands (docs/expert-parallel.md): the MPI session, the
// communicator and the exchange the model's MoE layers send their routed rows through, built
// before the model so it loads only this rank's experts. Run under `mpirun -np N`.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>

#include "base/status.h"
#include "parallel/ep_exchange.h"
#include "parallel/live_eplb.h"
#include "parallel/mpi_comm.h"

namespace CLI {
class App;
}

namespace ds::cli {

// How the experts are placed: contiguous blocks, or EPLB (docs/expert-parallel.md) when redundant
// copies or a load are given.
struct ExpertParallelOptions {
  int redundant_experts = 0;  // --ep-redundant-experts: extra copies EPLB may place
  int n_nodes = 1;            // --ep-nodes: machines (EPLB's hierarchical policy packs groups per node)
  std::string expert_load;    // --ep-expert-load: "l0,l1,..." per-expert load (default: uniform)
  // Live EPLB (docs/expert-parallel.md): re-place the experts from the load measured while running.
  int64_t rebalance_interval = 0;    // --ep-rebalance-interval: forward steps between checks (0 = off)
  int rebalance_window = 4;          // --ep-rebalance-window: checks whose load is summed
  double rebalance_min_gain = 0.05;  // --ep-rebalance-min-gain: apply when max/mean falls by this fraction
};

// --ep-redundant-experts, --ep-nodes, --ep-expert-load and the --ep-rebalance-* options.
void add_expert_parallel_options(CLI::App* sub, ExpertParallelOptions& o);

class ExpertParallelRuntime {
 public:
  // Reads `model_dir`/config.json for the routed expert count; places them over the ranks.
  static Result<std::unique_ptr<ExpertParallelRuntime>> start(const std::string& model_dir,
                                                              const ExpertParallelOptions& options);

  int rank() const { return comm_->rank(); }
  int n_ranks() const { return comm_->size(); }
  const MpiComm& comm() const { return *comm_; }
  MpiExpertExchange& exchange() { return *exchange_; }
  // Live EPLB, or null when --ep-rebalance-interval is 0.
  LiveEplb* live_eplb() { return live_eplb_ ? &*live_eplb_ : nullptr; }
  // Between two forwards, on every rank at the same step: counts the step, and every
  // --ep-rebalance-interval steps looks at the load and may move experts (a collective).
  // `layers`: ModelRunner::routed_expert_sets(). No-op without live EPLB.
  Status after_step(std::span<RoutedExpertSet* const> layers);
  // One JSON line: rank, experts owned, rows per expert, all-to-all bytes and seconds, and live
  // EPLB's counters when on.
  std::string stats_json() const;

 private:
  ExpertParallelRuntime() = default;
  // Declaration order is destruction order reversed: the exchange, then the communicator, then
  // MPI_Finalize.
  std::optional<MpiSession> session_;
  std::optional<MpiComm> comm_;
  std::optional<MpiExpertExchange> exchange_;
  std::optional<LiveEplb> live_eplb_;
};

// "out.npy" -> itself; "out.{rank}.npy" -> "out.3.npy" on rank 3.
std::string per_rank_path(const std::string& path, int rank);

}  // namespace ds::cli
