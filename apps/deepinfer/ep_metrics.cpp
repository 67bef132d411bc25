#include "ep_metrics.h"

#include <algorithm>
#include <string>
#include <vector>

namespace ds::cli {

void add_ep_metrics(server::MetricsRegistry& registry, const EpStepRunner& runner, int rank, int n_ranks) {
  registry.gauge("deepinfer:ep_rank", "This process's rank in the expert-parallel deployment.").set(rank);
  registry.gauge("deepinfer:ep_ranks", "Ranks in the expert-parallel deployment.").set(n_ranks);
  auto* expert_rows =
      &registry.counter_family("deepinfer:ep_expert_rows_total",
                               "Routed rows each expert computed here (its load): the experts held here, and "
                               "those held before live EPLB moved them.",
                               {"expert"});
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
  auto* rebalances = &registry.counter("deepinfer:ep_eplb_rebalances_total",
                                       "Expert placements live EPLB applied (--ep-rebalance-interval).");
  auto* checks = &registry.counter("deepinfer:ep_eplb_checks_total", "Loads live EPLB looked at.");
  auto* moved = &registry.counter("deepinfer:ep_eplb_experts_received_total",
                                  "Expert copies (x MoE layers) this rank loaded from other ranks.");
  auto* moved_bytes =
      &registry.counter("deepinfer:ep_eplb_bytes_received_total",
                        "Weight bytes of the expert copies this rank loaded from other ranks.");
  auto* eplb_seconds =
      &registry.counter("deepinfer:ep_eplb_seconds_total", "Time in live EPLB's checks and expert moves.");
  auto* move_seconds = &registry.counter_family("deepinfer:ep_eplb_move_seconds_total",
                                                "Time moving expert weights: packing what this rank sends, "
                                                "in MPI (waits included), installing what arrived.",
                                                {"phase"});
  auto* rank_imbalance = &registry.gauge_family(
      "deepinfer:ep_eplb_rank_imbalance",
      "Max over mean of the ranks' load in live EPLB's last window, with the placement in use then "
      "(\"before\") and with EPLB's placement for it (\"after\").",
      {"placement"});
  // Pointers into the registry, which outlives the collector; the runner outlives the server.
  registry.add_collector([=, &runner] {
    const EpStats s = runner.stats();
    const std::vector<int32_t> local_experts = runner.local_experts();
    double most = 0, sum = 0;
    for (int32_t e : local_experts) {
      const double rows = static_cast<double>(s.expert_rows[static_cast<size_t>(e)]);
      most = std::max(most, rows);
      sum += rows;
    }
    // Held here now (zeros included), or held before live EPLB moved them and with rows.
    for (size_t e = 0; e < s.expert_rows.size(); ++e) {
      const bool held = std::find(local_experts.begin(), local_experts.end(), static_cast<int32_t>(e)) !=
                        local_experts.end();
      if (held || s.expert_rows[e] > 0)
        expert_rows->with({std::to_string(e)}).set_total(static_cast<double>(s.expert_rows[e]));
    }
    const double mean = local_experts.empty() ? 0.0 : sum / static_cast<double>(local_experts.size());
    imbalance->set(mean > 0 ? most / mean : 1.0);
    bytes->with({"sent"}).set_total(static_cast<double>(s.bytes_sent));
    bytes->with({"received"}).set_total(static_cast<double>(s.bytes_received));
    seconds->set_total(s.alltoall_seconds);
    exchanges->set_total(static_cast<double>(s.exchanges));
    rows_sent->set_total(static_cast<double>(s.rows_sent));
    idle->set_total(static_cast<double>(runner.n_idle_steps()));
    const LiveEplbStats live = runner.live_eplb_stats();
    rebalances->set_total(static_cast<double>(live.rebalances));
    checks->set_total(static_cast<double>(live.checks));
    moved->set_total(static_cast<double>(live.experts_received));
    moved_bytes->set_total(static_cast<double>(live.bytes_received));
    eplb_seconds->set_total(live.seconds);
    move_seconds->with({"pack"}).set_total(live.pack_seconds);
    move_seconds->with({"transfer"}).set_total(live.transfer_seconds);
    move_seconds->with({"install"}).set_total(live.install_seconds);
    rank_imbalance->with({"before"}).set(live.imbalance_before);
    rank_imbalance->with({"after"}).set(live.imbalance_after);
  });
}

}  // namespace ds::cli
