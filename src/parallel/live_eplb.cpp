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
    : options_(options), rows_at_last_check_(static_cast<size_t>(n_experts), 0) {}

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
  // This interval's rows per expert, summed over the ranks (each rank counts the experts it holds).
  const std::vector<int64_t>& rows = exchange.stats().expert_rows;
  std::vector<int64_t> interval(rows.size());
  for (size_t e = 0; e < rows.size(); ++e) interval[e] = rows[e] - rows_at_last_check_[e];
  rows_at_last_check_ = rows;
  DS_TRY(comm.allreduce_sum_i64(interval));
  window_.push_back(std::move(interval));
  while (static_cast<int>(window_.size()) > options_.window_intervals) window_.pop_front();

  std::vector<float> load(rows.size(), 0.0f);
  double total = 0;
  for (const std::vector<int64_t>& w : window_) {
    for (size_t e = 0; e < w.size(); ++e) load[e] += static_cast<float>(w[e]);
  }
  for (float v : load) total += v;
  if (total <= 0) return Status();

  const ExpertPlacement& current = exchange.placement();
  DS_ASSIGN_OR_RETURN(EplbPlacement eplb, eplb_rebalance(load, options_.shape));
  DS_ASSIGN_OR_RETURN(ExpertPlacement packed,
                      ExpertPlacement::from_eplb(eplb, current.n_experts(), current.n_ranks));
  ExpertPlacement next = align_ranks(packed, current, options_.shape.n_nodes);
  stats_.imbalance_before = placement_imbalance(load, current);
  stats_.imbalance_after = placement_imbalance(load, next);
  if (stats_.imbalance_after >= stats_.imbalance_before * (1.0 - options_.min_gain)) return Status();

  const std::vector<ExpertMove> moves = plan_expert_moves(current, next);
  Status load_failure;
  DS_TRY(move_experts(comm, moves, layers, load_failure));
  const int me = comm.rank();
  if (!load_failure.ok()) {  // every rank keeps the current placement; free what arrived for nothing
    for (RoutedExpertSet* layer : layers) {
      for (int32_t e = 0; e < static_cast<int32_t>(layer->n_routed_experts()); ++e) {
        if (layer->holds_expert(e) && !current.holds(me, e)) layer->drop_expert(e);
      }
    }
    return load_failure;
  }
  for (int32_t e : current.local_experts(me)) {
    if (next.holds(me, e)) continue;
    for (RoutedExpertSet* layer : layers) layer->drop_expert(e);
    stats_.experts_dropped += static_cast<int64_t>(layers.size());
  }
  DS_TRY(exchange.set_placement(std::move(next)));
  ++stats_.rebalances;
  return Status();
}

Status LiveEplb::move_experts(const MpiComm& comm, std::span<const ExpertMove> moves,
                              std::span<RoutedExpertSet* const> layers, Status& load_failure) {
  const int me = comm.rank();
  const size_t n_ranks = static_cast<size_t>(comm.size());
  Status local;  // the first load failure here; the transfers go on so every rank stays in step
  std::vector<std::byte> send, recv;
  std::vector<int> send_counts(n_ranks), recv_counts(n_ranks), send_displs, recv_displs;
  for (RoutedExpertSet* layer : layers) {
    // One layer at a time: the buffers hold one layer's moved experts, not the model's.
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
