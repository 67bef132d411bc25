// Internal to the weights module: typed reads of config.json keys with errors that name the file
// and the key, shared by model_config.cpp (common and V3 keys) and model_config_v4.cpp.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "weights/model_config.h"

namespace ds::config_detail {

using Json = nlohmann::json;

enum class IntRange { positive, non_negative };

// Reads typed keys from one JSON object; every error names the source file and the key path.
class KeyReader {
 public:
  KeyReader(const Json& obj, std::string source, std::string prefix = "")
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  Status error(const std::string& key, const std::string& what) const {
    return Status(ErrorCode::weights_bad_config, source_ + ": " + prefix_ + key + ": " + what);
  }
  // Missing and null both count as absent (HF writes `null` for unset optional values).
  const Json* find(const std::string& key) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  Status get_int(const std::string& key, IntRange range, bool required, int& out) const {
    const Json* v = find(key);
    if (v == nullptr) return required ? error(key, "missing required key") : ok_status();
    const char* want =
        range == IntRange::positive ? "must be a positive integer" : "must be a non-negative integer";
    if (!v->is_number_integer()) return error(key, want);
    // Unsigned JSON numbers above INT64_MAX would wrap in get<int64_t>(); take them as too large.
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) {
      return error(key, std::string(want) + " below 2^31");
    }
    const int64_t x = v->get<int64_t>();
    if (x > INT32_MAX) return error(key, std::string(want) + " below 2^31");
    if (x < 0 || (range == IntRange::positive && x == 0)) return error(key, want);
    out = static_cast<int>(x);
    return ok_status();
  }

  Status get_double(const std::string& key, bool required, double& out) const {
    const Json* v = find(key);
    if (v == nullptr) return required ? error(key, "missing required key") : ok_status();
    if (!v->is_number()) return error(key, "must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x)) return error(key, "must be finite");
    out = x;
    return ok_status();
  }

  Status get_bool(const std::string& key, bool& out) const {
    const Json* v = find(key);
    if (v == nullptr) return ok_status();
    if (!v->is_boolean()) return error(key, "must be true or false");
    out = v->get<bool>();
    return ok_status();
  }

  Status get_string(const std::string& key, bool required, std::string& out) const {
    const Json* v = find(key);
    if (v == nullptr) return required ? error(key, "missing required key") : ok_status();
    if (!v->is_string()) return error(key, "must be a string");
    out = v->get<std::string>();
    return ok_status();
  }

  Status get_choice(const std::string& key, std::initializer_list<const char*> allowed,
                    std::string& out) const {
    DS_TRY(get_string(key, false, out));
    std::string list;
    for (const char* a : allowed) {
      if (out == a) return ok_status();
      list += list.empty() ? "" : ", ";
      list += a;
    }
    return error(key, "'" + out + "' is not supported (expected one of: " + list + ")");
  }

 private:
  const Json& obj_;
  std::string source_;
  std::string prefix_;
};

// A JSON array of integers in [lo, hi] (error names the key and the first bad element).
template <class Int>
Status get_int_array(const KeyReader& r, const std::string& key, bool required, int64_t lo, int64_t hi,
                     std::vector<Int>& out) {
  const Json* v = r.find(key);
  if (v == nullptr) return required ? r.error(key, "missing required key") : ok_status();
  if (!v->is_array()) return r.error(key, "must be an array of integers");
  out.clear();
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& e = (*v)[i];
    const std::string where = "element " + std::to_string(i);
    if (!e.is_number_integer()) return r.error(key, where + " must be an integer");
    // Unsigned values above INT64_MAX read back negative and fail the lower bound.
    const int64_t x = e.is_number_unsigned() && e.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? -1
                          : e.get<int64_t>();
    if (x < lo || x > hi) {
      return r.error(key, where + " is " + e.dump() + ", must be in [" + std::to_string(lo) + ", " +
                              std::to_string(hi) + "]");
    }
    out.push_back(static_cast<Int>(x));
  }
  return ok_status();
}

// The keys every model_type shares (model_config.cpp), read from `obj` (the config, or V4.1's
// text_config with prefix "text_config."); c.model_type is set already.
Status parse_common_keys(const Json& obj, const std::string& source, const std::string& prefix,
                         ModelConfig& c);
// `quantization_config` of `root` (absent or null: unquantised).
Status parse_quantization(const Json& root, const std::string& source, QuantizationConfig& q);
// deepseek_v4 keys (model_config_v4.cpp), also the ones V4.1 shares: reads them from `obj` into
// `c`, whose common keys are already parsed.
Status parse_deepseek_v4_keys(const Json& obj, const std::string& source, const std::string& prefix,
                              ModelConfig& c);
// The real V4-Flash config.json key set for `c`.
Json deepseek_v4_to_json(const ModelConfig& c);
// deepseek_v41 (model_config_v41.cpp): the DeepseekV41ForCausalLM wrapper and its text_config.
Result<ModelConfig> parse_deepseek_v41(const Json& root, const std::string& source);
Json deepseek_v41_to_json(const ModelConfig& c);

}  // namespace ds::config_detail
