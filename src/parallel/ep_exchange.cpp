#include "parallel/ep_exchange.h"

#include <chrono>
#include <climits>
#include <cstring>
#include <limits>
#include <string>

namespace ds {

namespace {

// Dispatch record: {int32 expert, float weight, float row[hidden]}.
constexpr int64_t kRecordHeaderBytes = 8;

}  // namespace

Result<MpiExpertExchange> MpiExpertExchange::create(const MpiComm& comm, ExpertPlacement placement) {
  if (placement.n_ranks != comm.size()) {
    return Status(ErrorCode::internal, "expert placement for " + std::to_string(placement.n_ranks) +
                                           " ranks on a communicator of " + std::to_string(comm.size()));
  }
  return MpiExpertExchange(comm, std::move(placement));
}

MpiExpertExchange::MpiExpertExchange(const MpiComm& comm, ExpertPlacement placement)
    : comm_(&comm), placement_(std::move(placement)) {
  stats_.expert_rows.assign(static_cast<size_t>(placement_.n_experts()), 0);
}

Status MpiExpertExchange::set_placement(int32_t layer, ExpertPlacement next) {
  if (layer < 0 || next.n_ranks != placement_.n_ranks || next.n_experts() != placement_.n_experts())
    return Status(ErrorCode::internal, "set_placement: another shape of placement");
  if (static_cast<size_t>(layer) >= layer_placement_.size())
    layer_placement_.resize(static_cast<size_t>(layer) + 1);
  layer_placement_[static_cast<size_t>(layer)] = std::move(next);
  return Status();
}

const ExpertPlacement& MpiExpertExchange::placement(int32_t layer) const {
  if (layer >= 0 && static_cast<size_t>(layer) < layer_placement_.size() &&
      layer_placement_[static_cast<size_t>(layer)].has_value())
    return *layer_placement_[static_cast<size_t>(layer)];
  return placement_;
}

std::vector<int32_t> MpiExpertExchange::local_experts() const {
  std::vector<bool> held(static_cast<size_t>(placement_.n_experts()), false);
  bool any_layer = false;
  for (size_t l = 0; l < stats_.layer_expert_rows.size(); ++l) {
    if (stats_.layer_expert_rows[l].empty()) continue;
    any_layer = true;
    for (int32_t e : placement(static_cast<int32_t>(l)).local_experts(comm_->rank()))
      held[static_cast<size_t>(e)] = true;
  }
  if (!any_layer) return placement_.local_experts(comm_->rank());
  std::vector<int32_t> out;
  for (size_t e = 0; e < held.size(); ++e)
    if (held[e]) out.push_back(static_cast<int32_t>(e));
  return out;
}

bool MpiExpertExchange::owns_expert(int32_t layer, int32_t expert) const {
  return placement(layer).holds(comm_->rank(), expert);
}

void MpiExpertExchange::run(const RoutedChoices& in, const LocalExpertRunner& run_local, float* y_choice) {
  if (status_.ok()) status_ = exchange(in, run_local, y_choice);
  if (!status_.ok()) {
    const int64_t n = in.n_rows * in.top_k * in.hidden;
    std::fill(y_choice, y_choice + n, std::numeric_limits<float>::quiet_NaN());
  }
}

Status MpiExpertExchange::alltoallv(const std::vector<char>& send, const std::vector<int>& send_bytes,
                                    std::vector<char>& recv, const std::vector<int>& recv_bytes) {
  std::vector<int> send_displs, recv_displs;
  if (!byte_displacements(send_bytes, send_displs) || !byte_displacements(recv_bytes, recv_displs)) {
    return Status(ErrorCode::transport_io, "expert all-to-all over 2 GiB in one layer (split the batch)");
  }
  const auto t0 = std::chrono::steady_clock::now();
  DS_TRY(comm_->alltoallv_bytes(send.data(), send_bytes, send_displs, recv.data(), recv_bytes, recv_displs));
  stats_.alltoall_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.bytes_sent += static_cast<int64_t>(send.size());
  stats_.bytes_received += static_cast<int64_t>(recv.size());
  return ok_status();
}

Status MpiExpertExchange::exchange(const RoutedChoices& in, const LocalExpertRunner& run_local,
                                   float* y_choice) {
  const int n_ranks = comm_->size();
  const int64_t d = in.hidden, n_choices = in.n_rows * in.top_k;
  const int64_t record_bytes = kRecordHeaderBytes + d * static_cast<int64_t>(sizeof(float));
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(float));
  ++stats_.exchanges;
  stats_.rows_sent += n_choices;
  if (in.layer < 0) return Status(ErrorCode::internal, "MoE exchange for layer " + std::to_string(in.layer));
  const ExpertPlacement& placement = this->placement(in.layer);
  const size_t layer = static_cast<size_t>(in.layer);
  if (layer >= stats_.layer_expert_rows.size()) stats_.layer_expert_rows.resize(layer + 1);
  std::vector<int64_t>& layer_rows = stats_.layer_expert_rows[layer];
  if (layer_rows.empty()) layer_rows.assign(static_cast<size_t>(placement.n_experts()), 0);

  // Dispatch order: by destination rank, ascending choice index within a rank (a stable sort).
  // An expert with copies is served by one per row, taken in turn by (this rank + row): which copy
  // computes a row never changes its bits (the copies hold the same weights).
  send_records_.assign(static_cast<size_t>(n_ranks), 0);
  dest_.resize(static_cast<size_t>(n_choices));
  for (int64_t c = 0; c < n_choices; ++c) {
    const int32_t e = in.expert[c];
    if (e < 0 || e >= placement.n_experts()) {
      return Status(ErrorCode::internal, "routed expert " + std::to_string(e) + " outside the placement");
    }
    dest_[c] = placement.rank_for(e, comm_->rank() + c / in.top_k);
    ++send_records_[static_cast<size_t>(dest_[c])];
  }
  std::vector<int64_t> fill(static_cast<size_t>(n_ranks) + 1, 0);
  for (int r = 0; r < n_ranks; ++r) fill[r + 1] = fill[r] + send_records_[r];
  send_order_.resize(static_cast<size_t>(n_choices));
  for (int64_t c = 0; c < n_choices; ++c) send_order_[fill[dest_[c]]++] = c;

  send_buf_.resize(static_cast<size_t>(n_choices * record_bytes));
  for (int64_t i = 0; i < n_choices; ++i) {
    const int64_t c = send_order_[i];
    char* rec = send_buf_.data() + i * record_bytes;
    std::memcpy(rec, &in.expert[c], 4);
    std::memcpy(rec + 4, &in.weight[c], 4);
    std::memcpy(rec + kRecordHeaderBytes, in.x + (c / in.top_k) * d, static_cast<size_t>(row_bytes));
  }
  recv_records_.assign(static_cast<size_t>(n_ranks), 0);
  DS_TRY(comm_->alltoall_counts(send_records_, recv_records_));
  int64_t n_recv = 0;
  std::vector<int> send_bytes(static_cast<size_t>(n_ranks)), recv_bytes(static_cast<size_t>(n_ranks));
  for (int r = 0; r < n_ranks; ++r) {
    n_recv += recv_records_[r];
    if (static_cast<int64_t>(send_records_[r]) * record_bytes > INT_MAX ||
        static_cast<int64_t>(recv_records_[r]) * record_bytes > INT_MAX) {
      return Status(ErrorCode::transport_io, "expert all-to-all over 2 GiB to one rank (split the batch)");
    }
    send_bytes[r] = static_cast<int>(send_records_[r] * record_bytes);
    recv_bytes[r] = static_cast<int>(recv_records_[r] * record_bytes);
  }
  recv_buf_.resize(static_cast<size_t>(n_recv * record_bytes));
  DS_TRY(alltoallv(send_buf_, send_bytes, recv_buf_, recv_bytes));

  // The received records (source rank ascending) as one batch of top_k = 1 choices; the local
  // grouped path runs each owned expert once over all of them.
  std::vector<float> x_recv(static_cast<size_t>(n_recv * d)), w_recv(static_cast<size_t>(n_recv));
  recv_expert_.resize(static_cast<size_t>(n_recv));
  for (int64_t i = 0; i < n_recv; ++i) {
    const char* rec = recv_buf_.data() + i * record_bytes;
    std::memcpy(&recv_expert_[i], rec, 4);
    std::memcpy(&w_recv[i], rec + 4, 4);
    std::memcpy(x_recv.data() + i * d, rec + kRecordHeaderBytes, static_cast<size_t>(row_bytes));
    if (!owns_expert(in.layer, recv_expert_[i])) {
      return Status(ErrorCode::invalid_argument, "rank " + std::to_string(comm_->rank()) +
                                                     " got rows for expert " +
                                                     std::to_string(recv_expert_[i]) +
                                                     " it does not own (ranks disagree on the placement)");
    }
    ++stats_.expert_rows[static_cast<size_t>(recv_expert_[i])];
    ++layer_rows[static_cast<size_t>(recv_expert_[i])];
  }
  const RoutedChoices received{x_recv.data(), n_recv, 1, d, recv_expert_.data(), w_recv.data(), in.layer};
  std::vector<char> y_recv(static_cast<size_t>(n_recv * row_bytes));
  run_experts_here(received, placement.n_experts(), run_local, groups_,
                   reinterpret_cast<float*>(y_recv.data()));

  // Combine: the outputs go back in the records' order; the sender puts each at its choice.
  for (int r = 0; r < n_ranks; ++r) {
    send_bytes[r] = static_cast<int>(recv_records_[r] * row_bytes);
    recv_bytes[r] = static_cast<int>(send_records_[r] * row_bytes);
  }
  std::vector<char> y_back(static_cast<size_t>(n_choices * row_bytes));
  DS_TRY(alltoallv(y_recv, send_bytes, y_back, recv_bytes));
  for (int64_t i = 0; i < n_choices; ++i) {
    std::memcpy(y_choice + send_order_[i] * d, y_back.data() + i * row_bytes, static_cast<size_t>(row_bytes));
  }
  return ok_status();
}

}  // namespace ds
