#include "tokenizer/tokenizer_spec.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "base/mapped_file.h"

namespace ds {
namespace {

using nlohmann::json;

Status bad(const std::string& file, const std::string& field, const std::string& what) {
  return Status(ErrorCode::tokenizer_bad_file, fmt::format("{}: {}: {}", file, field, what));
}

Result<json> parse_json(const std::string& text, const std::string& file) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    return Status(ErrorCode::tokenizer_bad_file, fmt::format("{}: not valid JSON: {}", file, e.what()));
  }
}

std::string field_name(const std::string& where, const char* key) {
  return where.empty() ? std::string(key) : where + "." + key;
}

bool is_null_or_absent(const json& obj, const char* key) { return !obj.contains(key) || obj[key].is_null(); }

// Reads an optional boolean field; absent or null gives `fallback`.
Result<bool> get_bool(const json& obj, const char* key, bool fallback, const std::string& file,
                      const std::string& where) {
  if (is_null_or_absent(obj, key)) return fallback;
  if (!obj[key].is_boolean()) return bad(file, field_name(where, key), "expected true or false");
  return obj[key].get<bool>();
}

Result<std::string> get_string(const json& obj, const char* key, const std::string& file,
                               const std::string& where) {
  if (!obj.contains(key)) return bad(file, field_name(where, key), "missing");
  if (!obj[key].is_string()) return bad(file, field_name(where, key), "expected a string");
  return obj[key].get<std::string>();
}

// The normalizer must be the identity: null or (nested) Sequences with nothing in them.
Status check_normalizer(const json& n, const std::string& file, const std::string& where) {
  if (n.is_null()) return ok_status();
  if (!n.is_object() || !n.contains("type")) return bad(file, where, "expected an object with a type");
  if (n["type"] == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (size_t i = 0; i < n["normalizers"].size(); ++i) {
      DS_TRY(check_normalizer(n["normalizers"][i], file, fmt::format("{}.normalizers[{}]", where, i)));
    }
    return ok_status();
  }
  return bad(file, where,
             fmt::format("normalizer {} is not supported (only an empty Sequence)", n["type"].dump()));
}

// Quotes a literal for PCRE2 (HF's Split pattern {"String": ...} matches the text literally).
std::string quote_literal(const std::string& literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

// The GPT-2 regex ByteLevel applies when its use_regex is true (HF byte_level.rs).
constexpr const char* kByteLevelRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

Status add_pre_tokenizer(const json& p, const std::string& file, const std::string& where,
                         TokenizerSpec& spec) {
  if (p.is_null()) return ok_status();
  if (!p.is_object() || !p.contains("type") || !p["type"].is_string()) {
    return bad(file, where, "expected an object with a type");
  }
  const std::string type = p["type"].get<std::string>();
  if (type == "Sequence") {
    if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array()) {
      return bad(file, where + ".pretokenizers", "expected an array");
    }
    for (size_t i = 0; i < p["pretokenizers"].size(); ++i) {
      DS_TRY(add_pre_tokenizer(p["pretokenizers"][i], file, fmt::format("{}.pretokenizers[{}]", where, i),
                               spec));
    }
    return ok_status();
  }
  if (type == "Split") {
    DS_ASSIGN_OR_RETURN(const std::string behavior, get_string(p, "behavior", file, where));
    if (behavior != "Isolated")
      return bad(file, where + ".behavior", fmt::format("{:?} is not supported (only Isolated)", behavior));
    DS_ASSIGN_OR_RETURN(const bool invert, get_bool(p, "invert", false, file, where));
    if (invert) return bad(file, where + ".invert", "true is not supported");
    if (!p.contains("pattern") || !p["pattern"].is_object())
      return bad(file, where + ".pattern", "expected an object");
    const json& pattern = p["pattern"];
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      spec.split_patterns.push_back(pattern["Regex"].get<std::string>());
    } else if (pattern.contains("String") && pattern["String"].is_string()) {
      spec.split_patterns.push_back(quote_literal(pattern["String"].get<std::string>()));
    } else {
      return bad(file, where + ".pattern", "expected {\"Regex\": string} or {\"String\": string}");
    }
    return ok_status();
  }
  if (type == "ByteLevel") {
    DS_ASSIGN_OR_RETURN(const bool add_prefix_space, get_bool(p, "add_prefix_space", true, file, where));
    if (add_prefix_space) return bad(file, where + ".add_prefix_space", "true is not supported");
    DS_ASSIGN_OR_RETURN(const bool use_regex, get_bool(p, "use_regex", true, file, where));
    if (use_regex) spec.split_patterns.emplace_back(kByteLevelRegex);
    return ok_status();
  }
  return bad(file, where, fmt::format("pre-tokenizer {:?} is not supported", type));
}

Status check_decoder(const json& d, const std::string& file) {
  if (!d.is_object() || !d.contains("type") || d["type"] != "ByteLevel") {
    return bad(file, "decoder", "only a ByteLevel decoder is supported");
  }
  return ok_status();
}

Status parse_model(const json& m, const std::string& file, BpeModelSpec& bpe) {
  if (!m.is_object()) return bad(file, "model", "expected an object");
  if (m.contains("type") && m["type"] != "BPE")
    return bad(file, "model.type", fmt::format("{} is not supported (only BPE)", m["type"].dump()));
  if (!is_null_or_absent(m, "dropout")) return bad(file, "model.dropout", "BPE dropout is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!is_null_or_absent(m, key) && !(m[key].is_string() && m[key].get<std::string>().empty())) {
      return bad(file, std::string("model.") + key, "not supported");
    }
  }
  DS_ASSIGN_OR_RETURN(const bool byte_fallback, get_bool(m, "byte_fallback", false, file, "model"));
  if (byte_fallback) return bad(file, "model.byte_fallback", "true is not supported");
  DS_ASSIGN_OR_RETURN(bpe.fuse_unk, get_bool(m, "fuse_unk", false, file, "model"));
  DS_ASSIGN_OR_RETURN(bpe.ignore_merges, get_bool(m, "ignore_merges", false, file, "model"));
  if (!is_null_or_absent(m, "unk_token")) {
    if (!m["unk_token"].is_string()) return bad(file, "model.unk_token", "expected a string or null");
    bpe.unk_token = m["unk_token"].get<std::string>();
  }

  if (!m.contains("vocab") || !m["vocab"].is_object())
    return bad(file, "model.vocab", "expected an object of token -> id");
  bpe.vocab.reserve(m["vocab"].size());
  for (const auto& [text, id] : m["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return bad(file, fmt::format("model.vocab[{:?}]", text), "expected a non-negative integer id");
    }
    bpe.vocab.emplace_back(text, static_cast<int32_t>(id.get<int64_t>()));
  }

  if (!m.contains("merges") || !m["merges"].is_array()) return bad(file, "model.merges", "expected an array");
  const json& merges = m["merges"];
  bpe.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    if (merge.is_string()) {
      // Legacy form "left right": exactly one space, as HF requires.
      const std::string& line = merge.get_ref<const std::string&>();
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return bad(file, fmt::format("model.merges[{}]", i),
                   fmt::format("{:?} is not two tokens separated by one space", line));
      }
      bpe.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      bpe.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      return bad(file, fmt::format("model.merges[{}]", i),
                 "expected \"left right\" or [\"left\", \"right\"]");
    }
  }
  return ok_status();
}

Status parse_added_tokens(const json& tokens, const std::string& file, std::vector<AddedToken>& out) {
  if (tokens.is_null()) return ok_status();
  if (!tokens.is_array()) return bad(file, "added_tokens", "expected an array");
  for (size_t i = 0; i < tokens.size(); ++i) {
    const json& t = tokens[i];
    const std::string where = fmt::format("added_tokens[{}]", i);
    if (!t.is_object()) return bad(file, where, "expected an object");
    if (!t.contains("id") || !t["id"].is_number_integer() || t["id"].get<int64_t>() < 0 ||
        t["id"].get<int64_t>() > INT32_MAX) {
      return bad(file, where + ".id", "expected a non-negative integer");
    }
    AddedToken token;
    token.id = static_cast<int32_t>(t["id"].get<int64_t>());
    DS_ASSIGN_OR_RETURN(token.content, get_string(t, "content", file, where));
    DS_ASSIGN_OR_RETURN(token.special, get_bool(t, "special", false, file, where));
    DS_ASSIGN_OR_RETURN(token.normalized, get_bool(t, "normalized", !token.special, file, where));
    DS_ASSIGN_OR_RETURN(token.lstrip, get_bool(t, "lstrip", false, file, where));
    DS_ASSIGN_OR_RETURN(token.rstrip, get_bool(t, "rstrip", false, file, where));
    DS_ASSIGN_OR_RETURN(token.single_word, get_bool(t, "single_word", false, file, where));
    out.push_back(std::move(token));
  }
  return ok_status();
}

// bos_token / eos_token: a string, an AddedToken object {"content": ...}, or null/absent.
Result<std::optional<std::string>> get_token_field(const json& config, const char* key,
                                                   const std::string& file) {
  if (is_null_or_absent(config, key)) return std::optional<std::string>();
  const json& v = config[key];
  if (v.is_string()) return std::optional<std::string>(v.get<std::string>());
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return std::optional<std::string>(v["content"].get<std::string>());
  }
  return bad(file, key, "expected a string, an object with a string \"content\", or null");
}

}  // namespace

Result<TokenizerSpec> parse_tokenizer_json(const std::string& json_text, const std::string& json_name) {
  DS_ASSIGN_OR_RETURN(const json root, parse_json(json_text, json_name));
  if (!root.is_object()) return bad(json_name, "(root)", "expected an object");
  TokenizerSpec spec;
  if (!root.contains("model")) return bad(json_name, "model", "missing");
  DS_TRY(parse_model(root["model"], json_name, spec.bpe));
  if (root.contains("normalizer")) DS_TRY(check_normalizer(root["normalizer"], json_name, "normalizer"));
  if (root.contains("pre_tokenizer"))
    DS_TRY(add_pre_tokenizer(root["pre_tokenizer"], json_name, "pre_tokenizer", spec));
  if (!root.contains("decoder")) return bad(json_name, "decoder", "missing");
  DS_TRY(check_decoder(root["decoder"], json_name));
  if (root.contains("added_tokens"))
    DS_TRY(parse_added_tokens(root["added_tokens"], json_name, spec.added_tokens));
  return spec;
}

Status parse_tokenizer_config(const std::string& config_text, const std::string& config_name,
                              TokenizerSpec& spec) {
  DS_ASSIGN_OR_RETURN(const json config, parse_json(config_text, config_name));
  if (!config.is_object()) return bad(config_name, "(root)", "expected an object");
  DS_ASSIGN_OR_RETURN(spec.add_bos_token, get_bool(config, "add_bos_token", false, config_name, ""));
  DS_ASSIGN_OR_RETURN(spec.bos_token, get_token_field(config, "bos_token", config_name));
  DS_ASSIGN_OR_RETURN(spec.eos_token, get_token_field(config, "eos_token", config_name));
  return ok_status();
}

Result<TokenizerSpec> load_tokenizer_spec(const std::string& dir) {
  const std::string json_path = (std::filesystem::path(dir) / "tokenizer.json").string();
  DS_ASSIGN_OR_RETURN(const std::string json_text, read_text_file(json_path));
  DS_ASSIGN_OR_RETURN(TokenizerSpec spec, parse_tokenizer_json(json_text, json_path));
  const std::string config_path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  std::error_code ec;
  if (std::filesystem::exists(config_path, ec)) {
    DS_ASSIGN_OR_RETURN(const std::string config_text, read_text_file(config_path));
    DS_TRY(parse_tokenizer_config(config_text, config_path, spec));
  }
  return spec;
}

}  // namespace ds
