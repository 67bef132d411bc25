// RAII over MPI (OpenMPI from Debian): the process-wide init/finalize and one communicator, with
// every MPI error returned as a Status (MPI_ERRORS_RETURN) instead of MPI's default abort. MPI
// failures are transport_io (a peer or the runtime is gone), as for the UCX transport.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace ds {

// MPI_Init_thread(SERIALIZED) on construction, MPI_Finalize on destruction. One per process, made
// by the app (never a library) when a command runs with --expert-parallel.
class MpiSession {
 public:
  static Result<MpiSession> init();
  MpiSession(MpiSession&& o) noexcept : active_(o.active_) { o.active_ = false; }
  MpiSession& operator=(MpiSession&&) = delete;
  MpiSession(const MpiSession&) = delete;
  ~MpiSession();

 private:
  MpiSession() = default;
  bool active_ = false;
};

// A duplicate of MPI_COMM_WORLD (so our traffic never mixes with another library's), freed on
// destruction. Not thread-safe: one thread at a time calls it (the model's forward thread).
class MpiComm {
 public:
  static Result<MpiComm> dup_world();
  MpiComm(MpiComm&& o) noexcept;
  MpiComm& operator=(MpiComm&&) = delete;
  MpiComm(const MpiComm&) = delete;
  ~MpiComm();

  int rank() const { return rank_; }
  int size() const { return size_; }

  // counts_in[r] = what this rank sends to rank r; counts_out[r] = what it gets from r.
  Status alltoall_counts(std::span<const int> counts_in, std::span<int> counts_out) const;
  // Bytes: send[send_displs[r], + send_counts[r]) goes to rank r; from rank r lands at recv_displs[r].
  Status alltoallv_bytes(const void* send, std::span<const int> send_counts, std::span<const int> send_displs,
                         void* recv, std::span<const int> recv_counts,
                         std::span<const int> recv_displs) const;
  // out[r] = value of rank r.
  Status allgather_i64(int64_t value, std::vector<int64_t>& out) const;
  // values[i] = the sum over ranks of values[i] (in place; every rank passes the same length).
  Status allreduce_sum_i64(std::span<int64_t> values) const;
  Status barrier() const;

 private:
  MpiComm() = default;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
};

// displs[r] = counts[0] + ... + counts[r - 1]; false when the total does not fit MPI's int counts.
bool byte_displacements(const std::vector<int>& counts, std::vector<int>& displs);

// A Status for an MPI return code ("MPI_Alltoallv: <MPI's error string>").
Status mpi_status(int rc, const char* what);

}  // namespace ds
