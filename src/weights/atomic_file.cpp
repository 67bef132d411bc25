#include "weights/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/unique_fd.h"

namespace ds {

namespace {

Status io_failure(const std::string& path, const char* what, int err) {
  return Status(ErrorCode::io_error, path + ": " + what + ": " + std::strerror(err));
}

Status write_all(int fd, const uint8_t* p, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return io_failure(path, "write failed", errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return ok_status();
}

// Removes the temporary file unless released (RAII for the error paths).
class TempFileGuard {
 public:
  explicit TempFileGuard(std::string path) : path_(std::move(path)) {}
  ~TempFileGuard() {
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace

Status write_file_atomically(const std::string& path, const std::vector<ByteSpan>& parts) {
  // mkstemp gives a name no concurrent writer of the same path can share.
  std::string tmp = path + ".tmp.XXXXXX";
  UniqueFd fd(::mkstemp(tmp.data()));
  if (!fd.valid()) return io_failure(tmp, "cannot create", errno);
  TempFileGuard guard(tmp);
  if (::fchmod(fd.get(), 0644) != 0) return io_failure(tmp, "fchmod failed", errno);
  for (const ByteSpan& part : parts) {
    DS_TRY(write_all(fd.get(), static_cast<const uint8_t*>(part.data), part.size, tmp));
  }
  if (::fsync(fd.get()) != 0) return io_failure(tmp, "fsync failed", errno);
  fd.reset();  // after a successful fsync, close cannot lose data
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return io_failure(path, "rename failed", errno);
  guard.release();
  return ok_status();
}

}  // namespace ds
