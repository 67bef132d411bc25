#include "weights/safetensors_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "weights/atomic_file.h"
#include "weights/safe_text.h"

namespace ds {

namespace {

using Json = nlohmann::json;

template <class Pending>
struct NamedTensor {
  const std::string* name;
  const Pending* tensor;
};

// Data layout order: larger elements first, then by name, so every tensor starts at a multiple of
// its element size (the header length is a multiple of 8). The reference (Rust/Python) writer also
// puts larger dtypes first for this reason; it lets readers use the mapping as typed arrays.
template <class Pending>
void sort_for_layout(std::vector<NamedTensor<Pending>>& list) {
  std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
    const size_t sa = dtype_size(a.tensor->dtype), sb = dtype_size(b.tensor->dtype);
    if (sa != sb) return sa > sb;
    return *a.name < *b.name;
  });
}

// Header JSON: nlohmann's default object is a std::map, so keys come out sorted; dump() is compact.
// Padded with spaces to a multiple of 8.
template <class Pending>
std::string make_header(const std::vector<NamedTensor<Pending>>& list,
                        const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : list) {
    Json shape = Json::array();
    for (int i = 0; i < t.tensor->shape.rank; ++i) shape.push_back(t.tensor->shape[i]);
    const uint64_t end = offset + t.tensor->bytes.size();
    header[*t.name] = Json{{"dtype", std::string(dtype_name(t.tensor->dtype))},
                           {"shape", std::move(shape)},
                           {"data_offsets", Json::array({offset, end})}};
    offset = end;
  }
  // Names and metadata were checked to be UTF-8, so `replace` never fires; it only guarantees
  // dump() cannot throw.
  std::string text = header.dump(-1, ' ', false, Json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

template <class Pending>
Status write_one(const std::string& path, std::vector<NamedTensor<Pending>> list,
                 const std::map<std::string, std::string>& metadata) {
  sort_for_layout(list);
  const std::string header = make_header(list, metadata);
  uint8_t len_le[8];
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len_le[i] = static_cast<uint8_t>(n >> (8 * i));
  std::vector<ByteSpan> parts;
  parts.reserve(list.size() + 2);
  parts.push_back({len_le, 8});
  parts.push_back({header.data(), header.size()});
  for (const auto& t : list) parts.push_back({t.tensor->bytes.data(), t.tensor->bytes.size()});
  return write_file_atomically(path, parts);
}

std::string shard_name(size_t index, size_t count) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", index, count);
  return buf;
}

}  // namespace

Status SafetensorsWriter::add(const std::string& name, DType dtype, const Shape& shape,
                              std::vector<uint8_t> bytes) {
  if (name.empty() || name == "__metadata__") {
    return Status(ErrorCode::invalid_argument, "safetensors writer: invalid tensor name '" + name + "'");
  }
  if (!is_valid_utf8(name)) {
    return Status(ErrorCode::invalid_argument,
                  "safetensors writer: tensor name " + quoted_for_message(name) + " is not valid UTF-8");
  }
  if (tensors_.count(name) != 0) {
    return Status(ErrorCode::invalid_argument, "safetensors writer: duplicate tensor '" + name + "'");
  }
  if (shape.rank < 0 || shape.rank > kMaxDims) {
    return Status(ErrorCode::invalid_argument, "safetensors writer: tensor '" + name + "': bad rank");
  }
  for (int i = 0; i < shape.rank; ++i) {
    if (shape[i] < 0) {
      return Status(ErrorCode::invalid_argument,
                    "safetensors writer: tensor '" + name + "': negative dim in " + shape.to_string());
    }
  }
  const uint64_t expected = static_cast<uint64_t>(shape.numel()) * dtype_size(dtype);
  if (bytes.size() != expected) {
    return Status(ErrorCode::invalid_argument, "safetensors writer: tensor '" + name +
                                                   "': " + std::to_string(bytes.size()) + " bytes for " +
                                                   std::string(dtype_name(dtype)) + " " + shape.to_string() +
                                                   " (expected " + std::to_string(expected) + ")");
  }
  tensors_.emplace(name, Pending{dtype, shape, std::move(bytes)});
  return ok_status();
}

size_t SafetensorsWriter::total_bytes() const {
  size_t total = 0;
  for (const auto& [name, t] : tensors_) total += t.bytes.size();
  return total;
}

Status SafetensorsWriter::check_metadata() const {
  for (const auto& [key, value] : metadata_) {
    if (!is_valid_utf8(key) || !is_valid_utf8(value)) {
      return Status(ErrorCode::invalid_argument,
                    "safetensors writer: metadata " + quoted_for_message(key) + " is not valid UTF-8");
    }
  }
  return ok_status();
}

Status SafetensorsWriter::write(const std::string& path) const {
  DS_TRY(check_metadata());
  std::vector<NamedTensor<Pending>> list;
  list.reserve(tensors_.size());
  for (const auto& [name, t] : tensors_) list.push_back({&name, &t});
  return write_one(path, std::move(list), metadata_);
}

Status SafetensorsWriter::write_sharded(const std::string& dir, size_t max_shard_bytes) const {
  DS_TRY(check_metadata());
  // Greedy packing in name order: a shard closes when the next tensor would push it over the limit.
  std::vector<std::vector<NamedTensor<Pending>>> shards;
  size_t shard_bytes = 0;
  for (const auto& [name, t] : tensors_) {
    if (shards.empty() || (shard_bytes > 0 && shard_bytes + t.bytes.size() > max_shard_bytes)) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back({&name, &t});
    shard_bytes += t.bytes.size();
  }
  if (shards.empty()) shards.emplace_back();  // an empty checkpoint is still one (empty) shard

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status(ErrorCode::io_error, dir + ": cannot create directory: " + ec.message());

  Json weight_map = Json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file = shard_name(i + 1, shards.size());
    for (const auto& t : shards[i]) weight_map[*t.name] = file;
    DS_TRY(write_one(dir + "/" + file, shards[i], metadata_));
  }
  // The index goes last: a reader never sees an index naming a shard that is not there yet.
  const Json index = {{"metadata", {{"total_size", total_bytes()}}}, {"weight_map", std::move(weight_map)}};
  const std::string text = index.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  return write_file_atomically(dir + "/model.safetensors.index.json", {{text.data(), text.size()}});
}

}  // namespace ds
