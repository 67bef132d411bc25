// Writes a file so that a crash never leaves a partial file under the final name: the bytes go to a
// unique temporary file in the same directory, which is fsync'ed and then renamed over `path`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ds {

struct ByteSpan {
  const void* data = nullptr;
  size_t size = 0;
};

// Concatenates `parts` into `path` atomically (io_error naming the path on failure; the temporary
// file is removed).
Status write_file_atomically(const std::string& path, const std::vector<ByteSpan>& parts);

}  // namespace ds
