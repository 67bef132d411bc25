// Writes safetensors files (used by make-model and tests). Deterministic bytes: the header is
// compact JSON with sorted keys, padded with spaces to a multiple of 8 as the Python writer does.
// Data is laid out by element size (largest first) then name, so each tensor is aligned to its
// element size (the reference writer also puts larger dtypes first). Files are written via a
// temporary file + rename.
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
  // bytes.size() must equal shape.numel() × dtype_size(dtype); the name must be non-empty UTF-8,
  // not "__metadata__", and not already added (invalid_argument otherwise).
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
  Status check_metadata() const;  // invalid_argument unless keys and values are UTF-8

  std::map<std::string, Pending> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ds
