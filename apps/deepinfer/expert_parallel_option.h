// `--expert-parallel` for the CLI commands (docs/expert-parallel.md): the MPI session, the
// communicator and the exchange the model's MoE layers send their routed rows through, built
// before the model so it loads only this rank's experts. Run under `mpirun -np N`.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "parallel/ep_exchange.h"
#include "parallel/mpi_comm.h"

namespace ds::cli {

// How the experts are placed: contiguous blocks, or EPLB (docs/expert-parallel.md) when redundant
// copies or a load are given.
struct ExpertParallelOptions {
  int redundant_experts = 0;  // --ep-redundant-experts: extra copies EPLB may place
  int n_nodes = 1;            // --ep-nodes: machines (EPLB's hierarchical policy packs groups per node)
  std::string expert_load;    // --ep-expert-load: "l0,l1,..." per-expert load (default: uniform)
};

class ExpertParallelRuntime {
 public:
  // Reads `model_dir`/config.json for the routed expert count; places them over the ranks.
  static Result<std::unique_ptr<ExpertParallelRuntime>> start(const std::string& model_dir,
                                                              const ExpertParallelOptions& options);

  int rank() const { return comm_->rank(); }
  int n_ranks() const { return comm_->size(); }
  const MpiComm& comm() const { return *comm_; }
  MpiExpertExchange& exchange() { return *exchange_; }
  // One JSON line: rank, experts owned, rows per expert, all-to-all bytes and seconds.
  std::string stats_json() const;

 private:
  ExpertParallelRuntime() = default;
  // Declaration order is destruction order reversed: the exchange, then the communicator, then
  // MPI_Finalize.
  std::optional<MpiSession> session_;
  std::optional<MpiComm> comm_;
  std::optional<MpiExpertExchange> exchange_;
};

// "out.npy" -> itself; "out.{rank}.npy" -> "out.3.npy" on rank 3.
std::string per_rank_path(const std::string& path, int rank);

}  // namespace ds::cli
