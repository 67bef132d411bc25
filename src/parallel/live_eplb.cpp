#include "parallel/live_eplb.h"

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

namespace ds {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One expert copy in a layer's transfer: {int32 expert, int32 0, int64 n_bytes} then the bytes.
struct MoveRecordHeader {
  int32_t expert = 0;
  int32_t pad = 0;
  int64_t n_bytes = 0;
};

void append_record(int32_t expert, const RoutedExpertSet& layer, std::vector<std::byte>& out) {
  const size_t at = out.size();
  out.resize(at + sizeof(MoveRecordHeader));
  layer.append_expert_bytes(expert, out);
  MoveRecordHeader h;
  h.expert = expert;
  h.n_bytes = static_cast<int64_t>(out.size() - at - sizeof(MoveRecordHeader));
  std::memcpy(out.data() + at, &h, sizeof(h));
}

}  // namespace

Result<LiveEplb> LiveEplb::create(const LiveEplbOptions& options, int64_t n_experts) {
  if (options.interval_steps < 1)
    return Status(ErrorCode::invalid_argument, "--ep-rebalance-interval must be >= 1 step");
  if (options.window_intervals < 1)
    return Status(ErrorCode::invalid_argument, "--ep-rebalance-window must be >= 1 interval");
  if (!(options.min_gain >= 0.0 && options.min_gain < 1.0))
    return Status(ErrorCode::invalid_argument, "--ep-rebalance-min-gain must be in [0, 1)");
  // The shape must be one EPLB can place: try it once on a uniform load.
  const std::vector<float> uniform(static_cast<size_t>(n_experts), 1.0f);
  DS_TRY(eplb_rebalance(uniform, options.shape).status());
  return LiveEplb(options, n_experts);
}

LiveEplb::LiveEplb(const LiveEplbOptions& options, int64_t n_experts)
    : options_(options), n_experts_(n_experts) {}

Status LiveEplb::after_step(const MpiComm& comm, MpiExpertExchange& exchange,
                            std::span<RoutedExpertSet* const> layers) {
  if (++steps_ % options_.interval_steps != 0) return Status();
  const auto t0 = std::chrono::steady_clock::now();
  Status st = check(comm, exchange, layers);
  stats_.seconds += seconds_since(t0);
  return st;
}

Status LiveEplb::check(const MpiComm& comm, MpiExpertExchange& exchange,
                       std::span<RoutedExpertSet* const> layers) {
  ++stats_.checks;
  const size_t n_layers = layers.size();
  const size_t E = static_cast<size_t>(n_experts_);
  // This interval's rows per layer and expert, summed over the ranks (each rank counts the rows its
  // copies computed), in one allreduce of [layers · experts].
  const std::vector<std::vector<int64_t>>& rows = exchange.stats().layer_expert_rows;
  rows_at_last_check_.resize(n_layers * E, 0);
  std::vector<int64_t> interval(n_layers * E, 0);
  for (size_t i = 0; i < n_layers; ++i) {
    const size_t l = static_cast<size_t>(layers[i]->layer_id());
    if (l >= rows.size() || rows[l].empty()) continue;
    for (size_t e = 0; e < E; ++e) {
      interval[i * E + e] = rows[l][e] - rows_at_last_check_[i * E + e];
      rows_at_last_check_[i * E + e] = rows[l][e];
    }
  }
  DS_TRY(comm.allreduce_sum_i64(interval));
  window_.push_back(std::move(interval));
  while (static_cast<int>(window_.size()) > options_.window_intervals) window_.pop_front();

  // Per layer: EPLB on the window's load; a layer changes placement when that lowers its imbalance
  // by min_gain. The summaries weight each layer's max/mean by its load (Σ max / Σ mean: the MoE
  // step time of a forward, every layer waiting for its busiest rank).
  std::vector<LayerChange> changes;
  double total_all = 0, weighted_before = 0, weighted_after = 0;
  for (size_t i = 0; i < n_layers; ++i) {
    std::vector<float> load(E, 0.0f);
    for (const std::vector<int64_t>& w : window_) {
      for (size_t e = 0; e < E; ++e) load[e] += static_cast<float>(w[i * E + e]);
    }
    double total = 0;
    for (float v : load) total += v;
    if (total <= 0) continue;
    const int32_t layer = layers[i]->layer_id();
    const ExpertPlacement& current = exchange.placement(layer);
    DS_ASSIGN_OR_RETURN(EplbPlacement eplb, eplb_rebalance(load, options_.shape));
    DS_ASSIGN_OR_RETURN(ExpertPlacement packed,
                        ExpertPlacement::from_eplb(eplb, n_experts_, current.n_ranks));
    ExpertPlacement next = align_ranks(packed, current, options_.shape.n_nodes);
    const double before = placement_imbalance(load, current), after = placement_imbalance(load, next);
    total_all += total;
    weighted_before += before * total;
    weighted_after += after * total;
    if (after < before * (1.0 - options_.min_gain)) changes.push_back(LayerChange{i, std::move(next)});
  }
  if (total_all > 0) {
    stats_.imbalance_before = weighted_before / total_all;
    stats_.imbalance_after = weighted_after / total_all;
  }
  if (changes.empty()) return Status();

  Status load_failure;
  DS_TRY(move_experts(comm, exchange, changes, layers, load_failure));
  const int me = comm.rank();
  for (const LayerChange& c : changes) {
    RoutedExpertSet& set = *layers[c.index];
    const ExpertPlacement& current = exchange.placement(set.layer_id());
    // On a failure every layer keeps its placement and what arrived is freed; else the copies
    // the new placement no longer puts here are.
    const ExpertPlacement& kept = load_failure.ok() ? c.next : current;
    for (int32_t e = 0; e < static_cast<int32_t>(n_experts_); ++e) {
      if (set.holds_expert(e) && !kept.holds(me, e)) {
        set.drop_expert(e);
        if (load_failure.ok()) ++stats_.experts_dropped;
      }
    }
  }
  if (!load_failure.ok()) return load_failure;
  for (LayerChange& c : changes)
    DS_TRY(exchange.set_placement(layers[c.index]->layer_id(), std::move(c.next)));
  ++stats_.rebalances;
  stats_.layers_rebalanced += static_cast<int64_t>(changes.size());
  return Status();
}

Status LiveEplb::move_experts(const MpiComm& comm, const MpiExpertExchange& exchange,
                              std::span<const LayerChange> changes, std::span<RoutedExpertSet* const> layers,
                              Status& load_failure) {
  const int me = comm.rank();
  const size_t n_ranks = static_cast<size_t>(comm.size());
  Status local;  // the first load failure here; the transfers go on so every rank stays in step
  std::vector<std::byte> send, recv;
  std::vector<int> send_counts(n_ranks), recv_counts(n_ranks), send_displs, recv_displs;
  for (const LayerChange& change : changes) {
    // One layer at a time: the buffers hold one layer's moved experts, not the model's.
    RoutedExpertSet* layer = layers[change.index];
    const std::vector<ExpertMove> moves =
        plan_expert_moves(exchange.placement(layer->layer_id()), change.next);
    auto t0 = std::chrono::steady_clock::now();
    send.clear();
    std::fill(send_counts.begin(), send_counts.end(), 0);
    for (const ExpertMove& m : moves) {  // sorted by (to, expert): grouped by destination
      if (m.from != me) continue;
      const size_t before = send.size();
      append_record(m.expert, *layer, send);
      if (send.size() - before > static_cast<size_t>(INT32_MAX))
        return Status(ErrorCode::transport_io, "live EPLB: one expert over 2 GiB");
      send_counts[static_cast<size_t>(m.to)] += static_cast<int>(send.size() - before);
    }
    stats_.pack_seconds += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    DS_TRY(comm.alltoall_counts(send_counts, recv_counts));
    if (!byte_displacements(send_counts, send_displs) || !byte_displacements(recv_counts, recv_displs))
      return Status(ErrorCode::transport_io, "live EPLB: one layer's moved experts over 2 GiB");
    recv.resize(static_cast<size_t>(recv_displs.back()) + static_cast<size_t>(recv_counts.back()));
    DS_TRY(
        comm.alltoallv_bytes(send.data(), send_counts, send_displs, recv.data(), recv_counts, recv_displs));
    stats_.transfer_seconds += seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    size_t at = 0;
    while (at + sizeof(MoveRecordHeader) <= recv.size()) {
      MoveRecordHeader h;
      std::memcpy(&h, recv.data() + at, sizeof(h));
      at += sizeof(h);
      if (h.n_bytes < 0 || static_cast<size_t>(h.n_bytes) > recv.size() - at) {
        if (local.ok()) local = Status(ErrorCode::transport_io, "live EPLB: truncated expert record");
        break;
      }
      Status st = layer->load_expert_bytes(
          h.expert, std::span<const std::byte>(recv).subspan(at, static_cast<size_t>(h.n_bytes)));
      if (!st.ok() && local.ok()) local = st;
      at += static_cast<size_t>(h.n_bytes);
      ++stats_.experts_received;
      stats_.bytes_received += h.n_bytes;
    }
    stats_.install_seconds += seconds_since(t0);
  }
  std::vector<int64_t> failed{local.ok() ? 0 : 1};
  DS_TRY(comm.allreduce_sum_i64(failed));
  if (!local.ok()) {
    load_failure = Status(
        local.code(), "live EPLB: placement kept, this rank could not load an expert: " + local.message());
  } else if (failed[0] != 0) {
    load_failure =
        Status(ErrorCode::internal, "live EPLB: placement kept, another rank could not load an expert");
  }
  return Status();
}

}  // namespace ds
