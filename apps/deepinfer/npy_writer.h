// Writes a 2-D float32 array as a NumPy .npy file (format version 1.0, '<f4', C order), the
// format `deepinfer logits` hands to the numpy reference.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace ds::cli {

// data: [rows, cols] row-major. Errors (io_error) name the path.
Status write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols);

}  // namespace ds::cli
