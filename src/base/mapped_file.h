// Read-only memory mapping of a whole file (RAII). Used for safetensors shards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace ds {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  // Maps `path` read-only. An empty file maps to size()==0, data()==nullptr.
  static Result<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Reads a whole (small) file into a string; the error names the path.
Result<std::string> read_text_file(const std::string& path);

}  // namespace ds
