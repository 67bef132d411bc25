#include "v4_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace ds::modelgen {
namespace {

// ordered_json keeps the files' key order, so the output reads like the input plus the markers.
using Json = nlohmann::ordered_json;

constexpr std::string_view kPlaceholderPrefix = "<｜place▁holder▁no▁";

Status bad(const std::string& source, const std::string& what) {
  return Status(ErrorCode::invalid_argument, source + ": " + what);
}

Json marker_entry(int32_t id, std::string_view content) {
  Json t = Json::object();
  t["id"] = id;
  t["content"] = std::string(content);
  t["single_word"] = false;
  t["lstrip"] = false;
  t["rstrip"] = false;
  t["normalized"] = false;
  t["special"] = false;
  return t;
}

}  // namespace

Result<TokenizerFiles> add_template_markers(std::string_view tokenizer_json, std::string_view config_json,
                                            std::span<const V4Marker> markers, int64_t vocab_size,
                                            const std::string& source) {
  const std::string tok_name = source + "/tokenizer.json";
  const std::string cfg_name = source + "/tokenizer_config.json";
  Json tok = Json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (tok.is_discarded() || !tok.is_object()) return bad(tok_name, "not a JSON object");
  if (!tok.contains("added_tokens") || !tok["added_tokens"].is_array())
    return bad(tok_name, "no \"added_tokens\" array (not a Hugging Face tokenizer.json)");
  if (!tok.contains("model") || !tok["model"].is_object() || !tok["model"].contains("vocab") ||
      !tok["model"]["vocab"].is_object())
    return bad(tok_name, "no \"model.vocab\" object (not a Hugging Face tokenizer.json)");
  Json cfg = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) return bad(cfg_name, "not a JSON object");

  Json& added = tok["added_tokens"];
  int64_t max_id = -1;
  std::vector<int64_t> vocab_ids;
  for (const auto& [piece, id] : tok["model"]["vocab"].items()) {
    if (!id.is_number_integer()) return bad(tok_name, "model.vocab[\"" + piece + "\"] is not an integer id");
    vocab_ids.push_back(id.get<int64_t>());
    max_id = std::max(max_id, vocab_ids.back());
  }
  std::sort(vocab_ids.begin(), vocab_ids.end());
  for (const Json& t : added) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string())
      return bad(tok_name, "added_tokens entries need an integer \"id\" and a string \"content\"");
    max_id = std::max(max_id, t["id"].get<int64_t>());
  }
  const auto find_added = [&](auto&& pred) -> Json* {
    for (Json& t : added)
      if (pred(t)) return &t;
    return nullptr;
  };

  std::vector<Json> new_entries;  // for tokenizer_config.json's added_tokens_decoder
  for (const V4Marker& m : markers) {
    if (find_added([&](const Json& t) { return t["content"].get<std::string>() == m.content; }) != nullptr) {
      continue;  // already a token (e.g. a V3.1 tokenizer has <think>)
    }
    int64_t id = -1;
    if (m.known_id >= 0) {
      Json* slot = find_added([&](const Json& t) { return t["id"].get<int64_t>() == m.known_id; });
      const bool in_vocab = std::binary_search(vocab_ids.begin(), vocab_ids.end(), int64_t{m.known_id});
      if (slot != nullptr && slot->at("content").get<std::string>().starts_with(kPlaceholderPrefix)) {
        *slot = marker_entry(m.known_id, m.content);  // the slot V3.1 and V4 use for it
        id = m.known_id;
      } else if (slot == nullptr && !in_vocab) {
        added.push_back(marker_entry(m.known_id, m.content));
        id = m.known_id;
      }
    }
    if (id < 0) {
      id = max_id + 1;
      added.push_back(marker_entry(static_cast<int32_t>(id), m.content));
    }
    max_id = std::max(max_id, id);
    if (id >= vocab_size) {
      return bad(tok_name, "marker '" + std::string(m.content) + "' would get id " + std::to_string(id) +
                               ", outside the checkpoint's vocab_size " + std::to_string(vocab_size));
    }
    new_entries.push_back(marker_entry(static_cast<int32_t>(id), m.content));
  }
  // HF loaders expect added_tokens in id order.
  std::stable_sort(added.begin(), added.end(), [](const Json& a, const Json& b) {
    return a["id"].get<int64_t>() < b["id"].get<int64_t>();
  });

  cfg.erase("chat_template");  // V3's template renders V3 prompts; V4 has no Jinja template
  if (cfg.contains("added_tokens_decoder") && cfg["added_tokens_decoder"].is_object()) {
    for (Json e : new_entries) {
      const std::string key = std::to_string(e["id"].get<int64_t>());
      e.erase("id");
      cfg["added_tokens_decoder"][key] = std::move(e);
    }
  }
  return TokenizerFiles{tok.dump(), cfg.dump(2) + "\n"};
}

}  // namespace ds::modelgen
