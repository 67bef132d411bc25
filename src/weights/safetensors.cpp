#include "weights/safetensors.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "weights/safe_text.h"

namespace ds {

namespace {

using Json = nlohmann::json;

// A header above this is not a real checkpoint (the largest real ones are a few MB) and parsing it
// would cost gigabytes of memory.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct Range {
  uint64_t begin;
  uint64_t end;
  size_t tensor;
};

class HeaderParser {
 public:
  HeaderParser(const std::string& file, const uint8_t* data, uint64_t data_size)
      : file_(file), data_(data), data_size_(data_size) {}

  Status header_error(const std::string& what) const {
    return Status(ErrorCode::weights_bad_header, file_ + ": " + what);
  }
  Status tensor_error(const std::string& name, const std::string& what) const {
    return Status(ErrorCode::weights_bad_tensor,
                  file_ + ": tensor " + quoted_for_message(name) + ": " + what);
  }

  Status parse_metadata(const Json& value, std::map<std::string, std::string>& out) const {
    if (!value.is_object()) return header_error("__metadata__ is not an object");
    for (const auto& [key, v] : value.items()) {
      if (!v.is_string())
        return header_error("__metadata__ value for " + quoted_for_message(key) + " is not a string");
      out.emplace(key, v.get<std::string>());
    }
    return ok_status();
  }

  Status parse_entry(const std::string& name, const Json& value, TensorEntry& entry, Range& range) const {
    if (name.empty()) return tensor_error(name, "empty tensor name");
    if (!value.is_object()) return tensor_error(name, "entry is not an object");
    auto dtype_it = value.find("dtype");
    if (dtype_it == value.end()) return tensor_error(name, "missing dtype");
    if (!dtype_it->is_string()) return tensor_error(name, "dtype is not a string");
    const std::string& dtype_text = dtype_it->get_ref<const std::string&>();
    const std::optional<DType> dtype = dtype_from_name(dtype_text);
    if (!dtype) return tensor_error(name, "unknown dtype " + quoted_for_message(dtype_text));

    auto shape_it = value.find("shape");
    if (shape_it == value.end()) return tensor_error(name, "missing shape");
    if (!shape_it->is_array()) return tensor_error(name, "shape is not an array");
    if (shape_it->size() > static_cast<size_t>(kMaxDims)) {
      return tensor_error(
          name, "rank " + std::to_string(shape_it->size()) + " exceeds " + std::to_string(kMaxDims));
    }
    Shape shape;
    // numel × element size must fit in int64 (Shape::numel's type) and in the file anyway.
    uint64_t nbytes = dtype_size(*dtype);
    for (const Json& d : *shape_it) {
      if (!d.is_number_unsigned()) return tensor_error(name, "shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(nbytes, dim, &nbytes) ||
          nbytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return tensor_error(name, "shape " + shape_it->dump() + " overflows the byte count");
      }
      shape.dims[shape.rank++] = static_cast<int64_t>(dim);
    }

    auto off_it = value.find("data_offsets");
    if (off_it == value.end()) return tensor_error(name, "missing data_offsets");
    if (!off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
        !(*off_it)[1].is_number_unsigned()) {
      return tensor_error(name, "data_offsets must be two non-negative integers");
    }
    const uint64_t begin = (*off_it)[0].get<uint64_t>();
    const uint64_t end = (*off_it)[1].get<uint64_t>();
    if (begin > end) {
      return tensor_error(
          name, "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] begin after end");
    }
    if (end > data_size_) {
      return tensor_error(name, "data_offsets end " + std::to_string(end) + " beyond the data section (" +
                                    std::to_string(data_size_) + " bytes)");
    }
    if (end - begin != nbytes) {
      return tensor_error(name, "data_offsets span " + std::to_string(end - begin) + " bytes but " +
                                    dtype_text + " " + shape.to_string() + " needs " +
                                    std::to_string(nbytes));
    }
    entry.name = name;
    entry.dtype = *dtype;
    entry.shape = shape;
    entry.data = data_ + begin;
    entry.nbytes = static_cast<size_t>(nbytes);
    range.begin = begin;
    range.end = end;
    return ok_status();
  }

  // The format forbids overlaps and holes: sorted by offsets, each tensor starts where the previous
  // one ended and the last one ends at the end of the file (as the reference implementation checks).
  Status check_layout(std::vector<Range> ranges, const std::vector<TensorEntry>& tensors) const {
    std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered = 0;
    const Range* prev = nullptr;
    for (const Range& r : ranges) {
      const std::string& name = tensors[r.tensor].name;
      if (r.begin < covered) {
        return tensor_error(name, "data_offsets [" + std::to_string(r.begin) + ", " + std::to_string(r.end) +
                                      "] overlap tensor " + quoted_for_message(tensors[prev->tensor].name));
      }
      if (r.begin > covered) {
        return tensor_error(name, "hole in the data section: bytes [" + std::to_string(covered) + ", " +
                                      std::to_string(r.begin) + ") belong to no tensor");
      }
      covered = r.end;
      prev = &r;
    }
    if (covered != data_size_) {
      return header_error("data section has " + std::to_string(data_size_ - covered) +
                          " trailing bytes after the last tensor (at offset " + std::to_string(covered) +
                          ")");
    }
    return ok_status();
  }

 private:
  const std::string& file_;
  const uint8_t* data_;
  uint64_t data_size_;
};

// nlohmann keeps the last of duplicate object keys; a duplicated tensor name would silently hide one
// entry, so the top-level keys are checked while parsing.
Json parse_header_json(const char* text, size_t n, std::string& duplicate_key) {
  std::set<std::string> seen;
  auto callback = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && duplicate_key.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) duplicate_key = key;
    }
    return true;
  };
  return Json::parse(text, text + n, callback, /*allow_exceptions=*/false);
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  DS_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  DS_ASSIGN_OR_RETURN(SafetensorsFile file, parse(map.data(), map.size(), path));
  file.map_ = std::move(map);  // the mapping's address does not change when the object moves
  return file;
}

Result<SafetensorsFile> SafetensorsFile::parse(const uint8_t* bytes, size_t size, const std::string& label) {
  SafetensorsFile f;
  *f.path_ = label;
  const std::string& file = *f.path_;
  auto header_error = [&](const std::string& what) {
    return Status(ErrorCode::weights_bad_header, file + ": " + what);
  };
  if (size < 8)
    return header_error("file is " + std::to_string(size) + " bytes, shorter than the 8-byte header length");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  if (header_len > kMaxHeaderBytes) {
    return header_error("header length " + std::to_string(header_len) + " exceeds the " +
                        std::to_string(kMaxHeaderBytes) + "-byte limit");
  }
  if (header_len > size - 8) {
    return header_error("header length " + std::to_string(header_len) + " exceeds file size " +
                        std::to_string(size));
  }
  const char* header = reinterpret_cast<const char*>(bytes + 8);
  if (!is_valid_utf8(std::string_view(header, header_len))) return header_error("header is not valid UTF-8");

  // nlohmann can still throw on allocation failure; nothing may escape this boundary.
  try {
    std::string duplicate;
    const Json root = parse_header_json(header, header_len, duplicate);
    if (root.is_discarded()) return header_error("header is not valid JSON");
    if (!root.is_object()) return header_error("header is not a JSON object");
    if (!duplicate.empty()) return header_error("key " + quoted_for_message(duplicate) + " appears twice");

    const uint8_t* data = bytes + 8 + header_len;
    HeaderParser parser(file, data, size - 8 - header_len);
    std::vector<Range> ranges;
    f.tensors_.reserve(root.size());
    for (const auto& [key, value] : root.items()) {
      if (key == "__metadata__") {
        DS_TRY(parser.parse_metadata(value, f.metadata_));
        continue;
      }
      TensorEntry entry;
      Range range{};
      DS_TRY(parser.parse_entry(key, value, entry, range));
      entry.file = f.path_.get();
      range.tensor = f.tensors_.size();
      f.tensors_.push_back(std::move(entry));
      ranges.push_back(range);
    }
    DS_TRY(parser.check_layout(std::move(ranges), f.tensors_));
  } catch (const std::exception& e) {
    return header_error(std::string("header could not be parsed: ") + e.what());
  }
  for (size_t i = 0; i < f.tensors_.size(); ++i) f.index_.emplace(f.tensors_[i].name, i);
  return f;
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace ds
