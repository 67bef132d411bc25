// Writes safetensors files (used by make-model and tests). Deterministic: the header lists
// tensors in name order with data laid out in that order (the
// header is padded with spaces to a multiple of 8, as the Python writer does).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "tensor/tensor.h"

namespace ds {

class SafetensorsWriter {
 public:
  // bytes.size() must equal shape.numel() × dtype_size(dtype).
  Status add(const std::string& name, DType dtype, const Shape& shape, std::vector<uint8_t> bytes);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  size_t total_bytes() const;
  size_t n_tensors() const { return tensors_.size(); }

  // One file.
  Status write(const std::string& path) const;
  // Shards of at most max_shard_bytes (a single larger tensor gets its own shard), named
  // model-00001-of-0000N.safetensors, plus model.safetensors.index.json. With one shard this
  // still writes the index (callers wanting a single file use write()).
  Status write_sharded(const std::string& dir, size_t max_shard_bytes) const;

 private:
  struct Pending {
    DType dtype;
    Shape shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Pending> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ds
