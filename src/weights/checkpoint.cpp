#include "weights/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/mapped_file.h"
#include "weights/safe_text.h"

namespace ds {

namespace {

using Json = nlohmann::json;

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

bool is_regular_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

// A shard must be a plain file name inside the checkpoint directory: no separators, no "." or
// "..", so a hostile index cannot make us map files elsewhere.
bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// Reads the index's weight_map (tensor name -> shard file name).
Result<std::map<std::string, std::string>> read_weight_map(const std::string& index_path) {
  DS_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  auto bad = [&](const std::string& what) {
    return Status(ErrorCode::weights_bad_header, index_path + ": " + what);
  };
  const Json root = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return bad("not valid JSON");
  if (!root.is_object()) return bad("not a JSON object");
  auto it = root.find("weight_map");
  if (it == root.end()) return bad("missing weight_map");
  if (!it->is_object()) return bad("weight_map is not an object");
  std::map<std::string, std::string> weight_map;
  for (const auto& [tensor, shard] : it->items()) {
    if (!shard.is_string()) return bad("weight_map[" + quoted_for_message(tensor) + "] is not a string");
    const std::string& file = shard.get_ref<const std::string&>();
    if (!is_plain_file_name(file)) {
      return bad("weight_map[" + quoted_for_message(tensor) + "]: shard " + quoted_for_message(file) +
                 " must be a plain file name inside the checkpoint directory");
    }
    weight_map.emplace(tensor, file);
  }
  return weight_map;
}

std::string describe(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + " " + shape.to_string();
}

Status shape_mismatch(const TensorEntry& t, const std::string& expected) {
  return Status(ErrorCode::weights_shape_mismatch, *t.file + ": tensor " + quoted_for_message(t.name) +
                                                       ": expected " + expected + ", got " +
                                                       describe(t.dtype, t.shape));
}

Status bad_tensor(const TensorEntry& t, const std::string& what) {
  return Status(ErrorCode::weights_bad_tensor,
                *t.file + ": tensor " + quoted_for_message(t.name) + ": " + what);
}

// E8M0 byte 255 is NaN: a weight with such a scale has no value, so refuse the file.
Status check_e8m0_scales(const TensorEntry& scale) {
  const auto* nan = static_cast<const uint8_t*>(std::memchr(scale.data, 0xff, scale.nbytes));
  if (nan == nullptr) return ok_status();
  const int64_t index = nan - scale.data;
  const int64_t cols = scale.shape.rank >= 2 ? scale.shape[scale.shape.rank - 1] : 1;
  return bad_tensor(scale, "E8M0 scale byte 255 (NaN) at [" + std::to_string(index / cols) + ", " +
                               std::to_string(index % cols) + "]");
}

Result<WeightMatrix> load_fp4(const Checkpoint& ckpt, const TensorEntry& w, const std::string& prefix,
                              int64_t rows, int64_t cols) {
  if (cols % kFp4BlockCols != 0) {
    return shape_mismatch(w, "a matrix with in_features a multiple of " + std::to_string(kFp4BlockCols) +
                                 " for packed FP4 (asked for [" + std::to_string(rows) + ", " +
                                 std::to_string(cols) + "])");
  }
  const Shape packed{rows, cols / 2};
  if (!(w.shape == packed)) return shape_mismatch(w, describe(DType::i8, packed) + " (packed FP4 E2M1)");
  const TensorEntry* scale = ckpt.find(prefix + ".scale");
  if (scale == nullptr) {
    return Status(ErrorCode::weights_missing_tensor,
                  *w.file + ": tensor " + quoted_for_message(w.name) + " is packed FP4 (I8) but " +
                      quoted_for_message(prefix + ".scale") + " does not exist");
  }
  const Shape grid{rows, cols / kFp4BlockCols};
  if (scale->dtype != DType::f8_e8m0 || !(scale->shape == grid)) {
    return shape_mismatch(*scale, describe(DType::f8_e8m0, grid));
  }
  DS_TRY(check_e8m0_scales(*scale));
  WeightMatrix m;
  m.format = WeightFormat::fp4_e2m1_block;
  m.data = w.data;
  m.rows = rows;
  m.cols = cols;
  m.scales_e8m0 = scale->data;
  m.block_rows = 1;
  m.block_cols = kFp4BlockCols;
  return m;
}

}  // namespace

Result<Checkpoint> Checkpoint::open(const std::string& dir) {
  Checkpoint ckpt;
  ckpt.dir_ = dir;
  const std::string index_path = dir + "/" + kIndexName;
  const std::string single_path = dir + "/" + kSingleName;
  std::map<std::string, std::string> weight_map;
  std::set<std::string> shard_names;
  if (is_regular_file(index_path)) {
    DS_ASSIGN_OR_RETURN(weight_map, read_weight_map(index_path));
    for (const auto& [tensor, shard] : weight_map) shard_names.insert(shard);
  } else if (is_regular_file(single_path)) {
    shard_names.insert(kSingleName);
  } else {
    return Status(ErrorCode::not_found, dir + ": no " + kIndexName + " or " + kSingleName);
  }

  for (const std::string& shard : shard_names) {
    DS_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(dir + "/" + shard));
    ckpt.files_.push_back(std::make_unique<SafetensorsFile>(std::move(file)));
    for (const TensorEntry& t : ckpt.files_.back()->tensors()) {
      auto [it, inserted] = ckpt.by_name_.emplace(t.name, &t);
      if (!inserted) {
        return Status(ErrorCode::weights_bad_tensor, dir + ": tensor " + quoted_for_message(t.name) +
                                                         " is in two shards: " + *it->second->file + " and " +
                                                         *t.file);
      }
    }
  }
  // Tensors a shard holds beyond the index stay reachable (HF loaders accept them too).
  for (const auto& [tensor, shard] : weight_map) {
    const std::string shard_path = dir + "/" + shard;
    auto it = ckpt.by_name_.find(tensor);
    if (it == ckpt.by_name_.end() || *it->second->file != shard_path) {
      return Status(ErrorCode::weights_missing_tensor,
                    index_path + ": tensor " + quoted_for_message(tensor) + " is not in shard " + shard_path +
                        (it == ckpt.by_name_.end() ? "" : " (found in " + *it->second->file + ")"));
    }
  }
  return ckpt;
}

const TensorEntry* Checkpoint::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

Result<const TensorEntry*> Checkpoint::get(const std::string& name) const {
  const TensorEntry* t = find(name);
  if (t == nullptr) {
    return Status(ErrorCode::weights_missing_tensor,
                  dir_ + ": tensor " + quoted_for_message(name) + " not found");
  }
  return t;
}

Result<const TensorEntry*> Checkpoint::get(const std::string& name, DType dtype, const Shape& shape) const {
  DS_ASSIGN_OR_RETURN(const TensorEntry* t, get(name));
  if (t->dtype != dtype || !(t->shape == shape)) return shape_mismatch(*t, describe(dtype, shape));
  return t;
}

std::vector<const TensorEntry*> Checkpoint::tensors() const {
  std::vector<const TensorEntry*> out;
  out.reserve(by_name_.size());
  for (const auto& [name, t] : by_name_) out.push_back(t);
  std::sort(out.begin(), out.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->name < b->name; });
  return out;
}

size_t Checkpoint::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : by_name_) total += t->nbytes;
  return total;
}

Result<WeightMatrix> load_linear(const Checkpoint& ckpt, const std::string& prefix, int64_t rows,
                                 int64_t cols, int block, std::vector<float>& scale_storage) {
  if (rows <= 0 || cols <= 0 || block <= 0) {
    return Status(ErrorCode::invalid_argument,
                  "load_linear " + prefix + ": rows, cols and block must be positive");
  }
  DS_ASSIGN_OR_RETURN(const TensorEntry* w, ckpt.get(prefix + ".weight"));
  if (w->dtype == DType::i8) return load_fp4(ckpt, *w, prefix, rows, cols);
  const Shape want{rows, cols};
  if (!(w->shape == want)) return shape_mismatch(*w, "shape " + want.to_string());
  // The kernels read the mapping as typed arrays; the writer (ours and the Python one) aligns every
  // tensor to its element size, so a misaligned one means a file we should not trust.
  const size_t elem = dtype_size(w->dtype);
  if (reinterpret_cast<uintptr_t>(w->data) % elem != 0) {
    return Status(ErrorCode::weights_bad_tensor, *w->file + ": tensor " + quoted_for_message(w->name) +
                                                     ": data not aligned to its " + std::to_string(elem) +
                                                     "-byte element size");
  }
  WeightMatrix m;
  m.data = w->data;
  m.rows = rows;
  m.cols = cols;
  switch (w->dtype) {
    case DType::bf16:
      m.format = WeightFormat::bf16;
      return m;
    case DType::f32:
      m.format = WeightFormat::f32;
      return m;
    case DType::f8_e4m3:
      break;
    default:
      return shape_mismatch(*w, "BF16, F32, F8_E4M3 or I8 (packed FP4)");
  }

  m.format = WeightFormat::fp8_e4m3_block;
  m.block_rows = block;
  m.block_cols = block;
  const Shape grid{m.scale_rows(), m.scale_cols()};
  const size_t n_scales = static_cast<size_t>(grid.numel());
  if (const TensorEntry* inv = ckpt.find(prefix + ".weight_scale_inv")) {
    // V3: an F32 multiplier per tile, used in place unless misaligned.
    if (inv->dtype != DType::f32 || !(inv->shape == grid))
      return shape_mismatch(*inv, describe(DType::f32, grid));
    if (reinterpret_cast<uintptr_t>(inv->data) % alignof(float) == 0) {
      m.scales = reinterpret_cast<const float*>(inv->data);
    } else {
      scale_storage.resize(n_scales);
      std::memcpy(scale_storage.data(), inv->data, n_scales * sizeof(float));
      m.scales = scale_storage.data();
    }
    return m;
  }
  if (const TensorEntry* e8 = ckpt.find(prefix + ".scale")) {
    // V4: one power-of-two byte per tile, widened to f32 once here so the kernels see one format.
    if (e8->dtype != DType::f8_e8m0 || !(e8->shape == grid)) {
      return shape_mismatch(*e8, describe(DType::f8_e8m0, grid));
    }
    DS_TRY(check_e8m0_scales(*e8));
    scale_storage.resize(n_scales);
    for (size_t i = 0; i < n_scales; ++i) scale_storage[i] = e8m0_to_f32(e8->data[i]);
    m.scales = scale_storage.data();
    return m;
  }
  return Status(ErrorCode::weights_missing_tensor,
                *w->file + ": tensor " + quoted_for_message(w->name) + " is F8_E4M3 but neither " +
                    quoted_for_message(prefix + ".weight_scale_inv") + " nor " +
                    quoted_for_message(prefix + ".scale") + " exists");
}

Result<std::vector<float>> load_f32(const Checkpoint& ckpt, const std::string& name, const Shape& shape) {
  DS_ASSIGN_OR_RETURN(const TensorEntry* t, ckpt.get(name));
  if (!(t->shape == shape)) return shape_mismatch(*t, "shape " + shape.to_string());
  const size_t n = static_cast<size_t>(shape.numel());
  std::vector<float> out(n);
  // memcpy per element: the mapping gives no alignment guarantee for arbitrary files.
  switch (t->dtype) {
    case DType::f32:
      std::memcpy(out.data(), t->data, n * sizeof(float));
      break;
    case DType::bf16:
    case DType::f16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, t->data + 2 * i, 2);
        out[i] = t->dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      break;
    default:
      return shape_mismatch(*t, "F32, BF16 or F16 " + shape.to_string());
  }
  return out;
}

Result<std::vector<float>> load_f32_param(const Checkpoint& ckpt, const std::string& name,
                                          const Shape& shape) {
  DS_ASSIGN_OR_RETURN(const TensorEntry* t, ckpt.get(name, DType::f32, shape));
  std::vector<float> out(static_cast<size_t>(shape.numel()));
  if (!out.empty()) std::memcpy(out.data(), t->data, out.size() * sizeof(float));
  for (size_t i = 0; i < out.size(); ++i) {
    if (!std::isfinite(out[i])) {
      return bad_tensor(
          *t, "element " + std::to_string(i) + " is " + std::to_string(out[i]) + " (must be finite)");
    }
  }
  return out;
}

Result<std::vector<int32_t>> load_expert_id_table(const Checkpoint& ckpt, const std::string& name,
                                                  int64_t vocab_size, int64_t n_activated,
                                                  int64_t n_routed_experts) {
  DS_ASSIGN_OR_RETURN(const TensorEntry* t, ckpt.get(name));
  const Shape want{vocab_size, n_activated};
  if ((t->dtype != DType::i64 && t->dtype != DType::i32) || !(t->shape == want)) {
    return shape_mismatch(*t, describe(DType::i64, want) + " (or I32)");
  }
  const size_t n = static_cast<size_t>(want.numel());
  std::vector<int32_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t id;
    if (t->dtype == DType::i64) {
      std::memcpy(&id, t->data + 8 * i, 8);
    } else {
      int32_t id32;
      std::memcpy(&id32, t->data + 4 * i, 4);
      id = id32;
    }
    if (id < 0 || id >= n_routed_experts) {
      return bad_tensor(*t, "token " + std::to_string(i / static_cast<size_t>(n_activated)) +
                                " routes to expert " + std::to_string(id) + ", outside [0, " +
                                std::to_string(n_routed_experts) + ")");
    }
    out[i] = static_cast<int32_t>(id);
  }
  return out;
}

}  // namespace ds
