#include "parallel/eplb.h"

#include <algorithm>
#include <numeric>
#include <string>

namespace ds {

namespace {

struct Packing {
  std::vector<int32_t> pack;     // [n items]
  std::vector<int32_t> rank_in;  // [n items] position inside its pack
};

// n weighted items into n_packs packs of exactly n / n_packs items, loads as even as possible:
// heaviest first, each into the lightest pack with room.
Packing balanced_packing(const std::vector<float>& w, int n_packs) {
  const size_t n = w.size();
  const size_t per_pack = n / static_cast<size_t>(n_packs);
  Packing p{std::vector<int32_t>(n), std::vector<int32_t>(n, 0)};
  if (per_pack == 1) {
    std::iota(p.pack.begin(), p.pack.end(), 0);
    return p;
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return w[a] > w[b]; });
  std::vector<float> pack_load(static_cast<size_t>(n_packs), 0.0f);
  std::vector<size_t> pack_items(static_cast<size_t>(n_packs), 0);
  for (int32_t item : order) {
    int best = -1;
    for (int k = 0; k < n_packs; ++k) {
      if (pack_items[k] < per_pack && (best < 0 || pack_load[k] < pack_load[best])) best = k;
    }
    p.pack[item] = best;
    p.rank_in[item] = static_cast<int32_t>(pack_items[best]++);
    pack_load[best] += w[item];
  }
  return p;
}

struct Replication {
  std::vector<int32_t> phy2log, rank;  // [n_phy]
  std::vector<int32_t> count;          // [n_log]
};

// n_log experts onto n_phy >= n_log slots: each extra slot copies the expert whose load per copy
// is highest (minimises the largest per-copy load).
Replication replicate_experts(const std::vector<float>& w, int64_t n_phy) {
  const int64_t n_log = static_cast<int64_t>(w.size());
  Replication r{std::vector<int32_t>(static_cast<size_t>(n_phy)),
                std::vector<int32_t>(static_cast<size_t>(n_phy), 0),
                std::vector<int32_t>(static_cast<size_t>(n_log), 1)};
  std::iota(r.phy2log.begin(), r.phy2log.begin() + n_log, 0);
  for (int64_t i = n_log; i < n_phy; ++i) {
    int64_t best = 0;
    for (int64_t e = 1; e < n_log; ++e) {
      if (w[e] / static_cast<float>(r.count[e]) > w[best] / static_cast<float>(r.count[best])) best = e;
    }
    r.phy2log[i] = static_cast<int32_t>(best);
    r.rank[i] = r.count[best]++;
  }
  return r;
}

EplbPlacement hierarchical(std::span<const float> load, int64_t n_phy, int n_groups, int n_nodes,
                           int n_ranks) {
  const int64_t n_log = static_cast<int64_t>(load.size());
  const int64_t group_size = n_log / n_groups, groups_per_node = n_groups / n_nodes;
  const int64_t log_per_node = n_log / n_nodes, phy_per_node = n_phy / n_nodes;
  const int64_t phy_per_rank = n_phy / n_ranks;
  const int ranks_per_node = n_ranks / n_nodes;

  // 1. Groups onto nodes; "mlog" numbers the logical experts node by node.
  std::vector<float> group_load(static_cast<size_t>(n_groups), 0.0f);
  for (int64_t e = 0; e < n_log; ++e) group_load[e / group_size] += load[e];
  const Packing groups = balanced_packing(group_load, n_nodes);
  std::vector<int32_t> log2mlog(static_cast<size_t>(n_log)), mlog2log(static_cast<size_t>(n_log));
  for (int64_t e = 0; e < n_log; ++e) {
    const int64_t g = e / group_size;
    log2mlog[e] = static_cast<int32_t>((groups.pack[g] * groups_per_node + groups.rank_in[g]) * group_size +
                                       e % group_size);
    mlog2log[log2mlog[e]] = static_cast<int32_t>(e);
  }

  EplbPlacement out;
  out.hierarchical = n_groups > 1 || n_nodes > 1;
  out.slot_expert.resize(static_cast<size_t>(n_phy));
  out.slot_replica.resize(static_cast<size_t>(n_phy));
  out.replica_count.resize(static_cast<size_t>(n_log));
  for (int node = 0; node < n_nodes; ++node) {
    // 2. Replicas within the node.
    std::vector<float> node_load(static_cast<size_t>(log_per_node));
    for (int64_t i = 0; i < log_per_node; ++i) node_load[i] = load[mlog2log[node * log_per_node + i]];
    const Replication rep = replicate_experts(node_load, phy_per_node);
    // 3. The node's physical experts onto its ranks, by load per copy.
    std::vector<float> phy_load(static_cast<size_t>(phy_per_node));
    for (int64_t p = 0; p < phy_per_node; ++p)
      phy_load[p] = node_load[rep.phy2log[p]] / static_cast<float>(rep.count[rep.phy2log[p]]);
    const Packing ranks = balanced_packing(phy_load, ranks_per_node);
    for (int64_t p = 0; p < phy_per_node; ++p) {
      const int64_t slot = node * phy_per_node + ranks.pack[p] * phy_per_rank + ranks.rank_in[p];
      out.slot_expert[slot] = mlog2log[node * log_per_node + rep.phy2log[p]];
      out.slot_replica[slot] = rep.rank[p];
    }
    for (int64_t i = 0; i < log_per_node; ++i)
      out.replica_count[mlog2log[node * log_per_node + i]] = rep.count[i];
  }
  return out;
}

Status bad(const std::string& what) { return Status(ErrorCode::invalid_argument, "EPLB: " + what); }

}  // namespace

Result<EplbPlacement> eplb_rebalance(std::span<const float> load, const EplbShape& s) {
  const int64_t n_log = static_cast<int64_t>(load.size());
  if (n_log == 0) return bad("no experts");
  if (s.n_ranks < 1 || s.n_nodes < 1 || s.n_groups < 1) return bad("ranks, nodes and groups must be >= 1");
  if (s.n_physical < n_log) return bad("fewer physical slots than experts");
  if (s.n_physical % s.n_ranks != 0) {
    return bad(std::to_string(s.n_physical) + " physical experts do not divide over " +
               std::to_string(s.n_ranks) + " ranks (choose the redundant count so they do)");
  }
  if (s.n_ranks % s.n_nodes != 0) return bad("ranks must divide evenly over nodes");
  if (n_log % s.n_groups != 0) return bad("expert groups must divide the experts");
  for (float v : load)
    if (!(v >= 0.0f)) return bad("loads must be non-negative numbers");
  // The hierarchical policy also needs whole nodes' worth of experts and slots.
  const bool hier = s.n_groups % s.n_nodes == 0 && n_log % s.n_nodes == 0 && s.n_physical % s.n_nodes == 0;
  return hier ? hierarchical(load, s.n_physical, s.n_groups, s.n_nodes, s.n_ranks)
              : hierarchical(load, s.n_physical, 1, 1, s.n_ranks);
}

double rank_imbalance(std::span<const float> load, const EplbPlacement& p, int n_ranks) {
  std::vector<double> rank_load(static_cast<size_t>(n_ranks), 0.0);
  const size_t per_rank = p.slot_expert.size() / static_cast<size_t>(n_ranks);
  for (size_t slot = 0; slot < p.slot_expert.size(); ++slot) {
    const int32_t e = p.slot_expert[slot];
    rank_load[slot / per_rank] += static_cast<double>(load[e]) / p.replica_count[e];
  }
  const double mean = std::accumulate(rank_load.begin(), rank_load.end(), 0.0) / n_ranks;
  const double most = *std::max_element(rank_load.begin(), rank_load.end());
  return mean > 0 ? most / mean : 1.0;
}

}  // namespace ds
