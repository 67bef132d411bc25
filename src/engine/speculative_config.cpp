#include "engine/speculative_config.h"

#include <nlohmann/json.hpp>

#include <climits>

namespace ds {

namespace {

Status bad(const std::string& what) {
  return Status(ErrorCode::invalid_argument, "--speculative-config: " + what);
}

}  // namespace

Result<SpeculativeConfig> parse_speculative_config(std::string_view json) {
  const nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad("not valid JSON");
  if (!doc.is_object())
    return bad("must be a JSON object like {\"method\": \"mtp\", \"num_speculative_tokens\": 3}");
  SpeculativeConfig cfg;
  bool delayed_given = false;  // confidence_capacity, checked against confidence_scheduling at the end
  for (const auto& [key, value] : doc.items()) {
    if (key == "method") {
      if (!value.is_string()) return bad("\"method\" must be a string");
      const std::string method = value.get<std::string>();
      if (method == "mtp" || method == "deepseek_mtp") {
        cfg.method = SpeculativeMethod::mtp;
      } else if (method == "dspark") {
        cfg.method = SpeculativeMethod::dspark;
      } else {
        return bad("\"method\": \"" + method + "\" is not supported (\"mtp\" or \"dspark\")");
      }
    } else if (key == "num_speculative_tokens") {
      if (!value.is_number_integer()) return bad("\"num_speculative_tokens\" must be an integer");
      const int64_t k = value.get<int64_t>();
      if (k < 1 || k > SpeculativeConfig::kMaxSpeculativeTokens) {
        return bad("\"num_speculative_tokens\" must be in [1, " +
                   std::to_string(SpeculativeConfig::kMaxSpeculativeTokens) + "], got " + std::to_string(k));
      }
      cfg.num_speculative_tokens = static_cast<int32_t>(k);
    } else if (key == "adaptive") {
      if (!value.is_boolean()) return bad("\"adaptive\" must be true or false");
      cfg.adaptive = value.get<bool>();
    } else if (key == "draft_vocab") {
      if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > INT32_MAX)
        return bad("\"draft_vocab\" must be an integer >= 0 (0 = the full vocabulary)");
      cfg.draft_vocab = static_cast<int32_t>(value.get<int64_t>());
    } else if (key == "draft_sampling") {
      const std::string mode = value.is_string() ? value.get<std::string>() : "";
      if (mode == "greedy") {
        cfg.draft_sampling = DraftSampling::greedy;
      } else if (mode == "sampled") {
        cfg.draft_sampling = DraftSampling::sampled;
      } else {
        return bad("\"draft_sampling\" must be \"greedy\" or \"sampled\"");
      }
    } else if (key == "confidence_scheduling") {
      if (!value.is_boolean()) return bad("\"confidence_scheduling\" must be true or false");
      cfg.confidence_scheduling = value.get<bool>();
    } else if (key == "confidence_capacity") {
      const std::string mode = value.is_string() ? value.get<std::string>() : "";
      if (mode != "fresh" && mode != "two_steps_back")
        return bad("\"confidence_capacity\" must be \"fresh\" or \"two_steps_back\"");
      cfg.confidence_delayed = mode == "two_steps_back";
      delayed_given = true;
    } else {
      return bad("unknown key \"" + key +
                 "\" (known: method, num_speculative_tokens, adaptive, draft_sampling, draft_vocab, "
                 "confidence_scheduling, confidence_capacity)");
    }
  }
  if (cfg.method == SpeculativeMethod::none) return bad("\"method\" is missing");
  if (cfg.confidence_scheduling && cfg.method != SpeculativeMethod::dspark)
    return bad("\"confidence_scheduling\" needs \"method\": \"dspark\" (its drafts carry confidences)");
  if (delayed_given && !cfg.confidence_scheduling)
    return bad("\"confidence_capacity\" needs \"confidence_scheduling\": true");
  if (cfg.num_speculative_tokens == 0) return bad("\"num_speculative_tokens\" is missing");
  return cfg;
}

}  // namespace ds
