// EPLB: DeepSeek's expert-parallelism load balancer (github.com/deepseek-ai/EPLB), one MoE layer,
// as a pure function of the per-expert load (docs/expert-parallel.md).
//
// Hierarchical policy (when the expert groups divide evenly over the nodes): pack whole expert
// groups onto nodes so node loads balance, replicate the hottest experts within each node, then
// pack each node's physical experts onto its ranks. Global policy (otherwise): one group, one
// node. Packing is greedy longest-first into the lightest pack that still has room; replication
// repeatedly copies the expert with the highest load per replica. Ties go to the lower index
// (the Python original leaves ties to torch's sort).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace ds {

struct EplbShape {
  int64_t n_physical = 0;  // experts after replication (n_experts + redundant), a multiple of n_ranks
  int n_groups = 1;        // expert groups (V3: n_group); must divide n_experts
  int n_nodes = 1;         // machines; must divide n_ranks
  int n_ranks = 1;
};

struct EplbPlacement {
  // [n_physical] the logical expert of each physical slot; slot s lives on rank s / (n_physical / n_ranks).
  std::vector<int32_t> slot_expert;
  std::vector<int32_t> slot_replica;   // [n_physical] which copy of its expert the slot is (0, 1, ...)
  std::vector<int32_t> replica_count;  // [n_experts]
  bool hierarchical = false;           // which policy was used
};

// load: [n_experts] tokens routed to each expert over the window (any non-negative scale).
// invalid_argument for shapes the policy cannot place (see EplbShape).
Result<EplbPlacement> eplb_rebalance(std::span<const float> load, const EplbShape& shape);

// Max over ranks / mean over ranks of the load each rank serves, with an expert's load split evenly
// over its replicas (1 = perfect balance).
double rank_imbalance(std::span<const float> load, const EplbPlacement& p, int n_ranks);

}  // namespace ds
