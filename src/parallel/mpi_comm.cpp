#include "parallel/mpi_comm.h"

#include <climits>
#include <string>

namespace ds {

Status mpi_status(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return ok_status();
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return Status(ErrorCode::transport_io,
                std::string(what) + ": " + std::string(text, static_cast<size_t>(len)));
}

Result<MpiSession> MpiSession::init() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized)
    return Status(ErrorCode::internal, "MPI is already initialized (one MpiSession per process)");
  int provided = 0;
  DS_TRY(mpi_status(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread"));
  MpiSession s;
  s.active_ = true;
  if (provided < MPI_THREAD_SERIALIZED) {
    return Status(ErrorCode::transport_io,
                  "MPI_Init_thread: the MPI library does not provide MPI_THREAD_SERIALIZED");
  }
  return s;
}

MpiSession::~MpiSession() {
  if (active_) MPI_Finalize();
}

Result<MpiComm> MpiComm::dup_world() {
  MpiComm c;
  // Errors on the world communicator during the dup itself are MPI's default (fatal); after it ours return.
  DS_TRY(mpi_status(MPI_Comm_dup(MPI_COMM_WORLD, &c.comm_), "MPI_Comm_dup"));
  DS_TRY(mpi_status(MPI_Comm_set_errhandler(c.comm_, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler"));
  DS_TRY(mpi_status(MPI_Comm_rank(c.comm_, &c.rank_), "MPI_Comm_rank"));
  DS_TRY(mpi_status(MPI_Comm_size(c.comm_, &c.size_), "MPI_Comm_size"));
  return c;
}

MpiComm::MpiComm(MpiComm&& o) noexcept : comm_(o.comm_), rank_(o.rank_), size_(o.size_) {
  o.comm_ = MPI_COMM_NULL;
}

MpiComm::~MpiComm() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Status MpiComm::alltoall_counts(std::span<const int> counts_in, std::span<int> counts_out) const {
  if (counts_in.size() != static_cast<size_t>(size_) || counts_out.size() != static_cast<size_t>(size_))
    return Status(ErrorCode::internal, "alltoall_counts: one count per rank");
  return mpi_status(MPI_Alltoall(counts_in.data(), 1, MPI_INT, counts_out.data(), 1, MPI_INT, comm_),
                    "MPI_Alltoall");
}

Status MpiComm::alltoallv_bytes(const void* send, std::span<const int> send_counts,
                                std::span<const int> send_displs, void* recv,
                                std::span<const int> recv_counts, std::span<const int> recv_displs) const {
  return mpi_status(MPI_Alltoallv(send, send_counts.data(), send_displs.data(), MPI_BYTE, recv,
                                  recv_counts.data(), recv_displs.data(), MPI_BYTE, comm_),
                    "MPI_Alltoallv");
}

Status MpiComm::allgather_i64(int64_t value, std::vector<int64_t>& out) const {
  out.assign(static_cast<size_t>(size_), 0);
  return mpi_status(MPI_Allgather(&value, 1, MPI_INT64_T, out.data(), 1, MPI_INT64_T, comm_),
                    "MPI_Allgather");
}

Status MpiComm::allreduce_sum_i64(std::span<int64_t> values) const {
  return mpi_status(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_INT64_T,
                                  MPI_SUM, comm_),
                    "MPI_Allreduce");
}

bool byte_displacements(const std::vector<int>& counts, std::vector<int>& displs) {
  displs.resize(counts.size());
  int64_t at = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    displs[r] = static_cast<int>(at);
    at += counts[r];
    if (at > INT_MAX) return false;
  }
  return true;
}

Status MpiComm::barrier() const { return mpi_status(MPI_Barrier(comm_), "MPI_Barrier"); }

}  // namespace ds
