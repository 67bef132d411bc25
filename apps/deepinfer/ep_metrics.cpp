#include "ep_metrics.h"

#include <algorithm>
#include <string>

namespace ds::cli {

void add_ep_metrics(server::MetricsRegistry& registry, const EpStepRunner& runner, int rank, int n_ranks,
                    std::vector<int32_t> local_experts) {
  registry.gauge("deepinfer:ep_rank", "This process's rank in the expert-parallel deployment.").set(rank);
  registry.gauge("deepinfer:ep_ranks", "Ranks in the expert-parallel deployment.").set(n_ranks);
  auto* expert_rows = &registry.counter_family(
      "deepinfer:ep_expert_rows_total", "Routed rows each expert held here computed (its load).", {"expert"});
  auto* imbalance = &registry.gauge("deepinfer:ep_local_expert_imbalance",
                                    "Max over mean of the rows of the experts held here (1 = even). The "
                                    "imbalance across ranks is max/mean of each rank's sum of "
                                    "deepinfer:ep_expert_rows_total.");
  auto* bytes =
      &registry.counter_family("deepinfer:ep_alltoall_bytes_total",
                               "Bytes this rank sent or received in the MoE all-to-alls.", {"direction"});
  auto* seconds =
      &registry.counter("deepinfer:ep_alltoall_seconds_total", "Time inside the MoE all-to-alls.");
  auto* exchanges =
      &registry.counter("deepinfer:ep_exchanges_total", "MoE layer exchanges this rank joined.");
  auto* rows_sent =
      &registry.counter("deepinfer:ep_rows_sent_total", "Routed rows this rank's requests sent out.");
  auto* idle = &registry.counter("deepinfer:ep_idle_steps_total",
                                 "Steps this rank ran with no rows of its own, serving the other ranks.");
  // Pointers into the registry, which outlives the collector; the runner outlives the server.
  registry.add_collector([=, &runner] {
    const EpStats s = runner.stats();
    double most = 0, sum = 0;
    for (int32_t e : local_experts) {
      const double rows = static_cast<double>(s.expert_rows[static_cast<size_t>(e)]);
      expert_rows->with({std::to_string(e)}).set_total(rows);
      most = std::max(most, rows);
      sum += rows;
    }
    const double mean = local_experts.empty() ? 0.0 : sum / static_cast<double>(local_experts.size());
    imbalance->set(mean > 0 ? most / mean : 1.0);
    bytes->with({"sent"}).set_total(static_cast<double>(s.bytes_sent));
    bytes->with({"received"}).set_total(static_cast<double>(s.bytes_received));
    seconds->set_total(s.alltoall_seconds);
    exchanges->set_total(static_cast<double>(s.exchanges));
    rows_sent->set_total(static_cast<double>(s.rows_sent));
    idle->set_total(static_cast<double>(runner.n_idle_steps()));
  });
}

}  // namespace ds::cli
