// One safetensors file over mmap, strictly validated at open:
// 8-byte little-endian header length within the file; header is a UTF-8 JSON object; every tensor
// has a known dtype name, a shape of non-negative ints, data_offsets [begin, end] inside the data
// section with end - begin == numel × dtype size; no two tensors overlap; "__metadata__" is a
// string→string map. Errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "tensor/tensor.h"

namespace ds {

struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  const uint8_t* data = nullptr;  // into the mapping; valid while the SafetensorsFile lives
  size_t nbytes = 0;
  const std::string* file = nullptr;  // path of the file holding it (for error messages)

  TensorView view() const { return TensorView{data, dtype, shape}; }
};

class SafetensorsFile {
 public:
  static Result<SafetensorsFile> open(const std::string& path);
  // Validates an in-memory image (the fuzz target uses this; `label` names it in errors).
  // The returned file refers to `bytes`, which must outlive it.
  static Result<SafetensorsFile> parse(const uint8_t* bytes, size_t size, const std::string& label);

  const std::string& path() const { return *path_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const TensorEntry* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  MappedFile map_;
  std::unique_ptr<std::string> path_ = std::make_unique<std::string>();  // stable address
  std::vector<TensorEntry> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace ds
