#include "base/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"

namespace ds {

MappedFile::~MappedFile() { reset(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(other.data_), size_(other.size_), path_(std::move(other.path_)) {
  other.data_ = nullptr;
  other.size_ = 0;
}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    reset();
    data_ = other.data_;
    size_ = other.size_;
    path_ = std::move(other.path_);
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void MappedFile::reset() {
  if (data_ != nullptr) munmap(const_cast<uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

Result<MappedFile> MappedFile::open(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return Status(ErrorCode::io_error, path + ": cannot open: " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) {
    return Status(ErrorCode::io_error, path + ": cannot stat: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    return Status(ErrorCode::io_error, path + ": not a regular file");
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ == 0) return file;
  void* p = mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (p == MAP_FAILED) {
    file.size_ = 0;
    return Status(ErrorCode::io_error, path + ": mmap failed: " + std::strerror(errno));
  }
  file.data_ = static_cast<const uint8_t*>(p);
  return file;
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::io_error, path + ": cannot open: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status(ErrorCode::io_error, path + ": read failed");
  return ss.str();
}

}  // namespace ds
