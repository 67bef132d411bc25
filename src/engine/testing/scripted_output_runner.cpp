#include "engine/testing/scripted_output_runner.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace ds::testing {

namespace {

// KMP failure function of `pattern`: fail[i] = length of the longest proper border of pattern[0..i].
std::vector<size_t> failure_function(std::span<const int32_t> pattern) {
  std::vector<size_t> fail(pattern.size(), 0);
  for (size_t i = 1, k = 0; i < pattern.size(); ++i) {
    while (k > 0 && pattern[i] != pattern[k]) k = fail[k - 1];
    if (pattern[i] == pattern[k]) ++k;
    fail[i] = k;
  }
  return fail;
}

// Length of the longest suffix of `text` that is a proper prefix of `pattern`.
size_t longest_suffix_prefix(std::span<const int32_t> text, std::span<const int32_t> pattern) {
  if (pattern.empty()) return 0;
  const std::vector<size_t> fail = failure_function(pattern);
  size_t k = 0;
  for (const int32_t t : text) {
    if (k == pattern.size()) k = fail[k - 1];  // a full match: continue from its longest border
    while (k > 0 && t != pattern[k]) k = fail[k - 1];
    if (t == pattern[k]) ++k;
  }
  // A complete script (the sequence ends with its EOS) forces nothing more.
  return k == pattern.size() ? 0 : k;
}

}  // namespace

Result<std::vector<OutputScript>> parse_output_scripts(std::string_view json_text, const Tokenizer& tokenizer,
                                                       const std::string& source) {
  const nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& what) {
    return Status(ErrorCode::invalid_argument, source + ": " + what);
  };
  if (doc.is_discarded()) return bad("not valid JSON");
  const nlohmann::json* list = &doc;
  if (doc.is_object() && doc.contains("scripts")) list = &doc["scripts"];
  if (!list->is_array() || list->empty())
    return bad("expected a non-empty array of strings (or {\"scripts\": [...]})");
  const int32_t eos = tokenizer.eos_id();
  if (eos < 0) return bad("the tokenizer has no EOS token to end scripts with");
  std::vector<OutputScript> scripts;
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& s = (*list)[i];
    const std::string where = "scripts[" + std::to_string(i) + "]";
    if (!s.is_string() || s.get_ref<const std::string&>().empty())
      return bad(where + ": expected a non-empty string");
    Result<std::vector<int32_t>> ids =
        tokenizer.encode(s.get_ref<const std::string&>(), /*parse_special=*/true);
    if (!ids.ok()) return bad(where + ": " + ids.status().message());
    OutputScript script = std::move(ids).value();
    if (script.empty() || script.back() != eos) script.push_back(eos);
    if (script.size() < 2) return bad(where + ": nothing to emit besides EOS");
    scripts.push_back(std::move(script));
  }
  return scripts;
}

Result<std::vector<OutputScript>> load_output_scripts(const std::string& path, const Tokenizer& tokenizer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(ErrorCode::io_error, path + ": cannot read the output script file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_output_scripts(text.str(), tokenizer, path);
}

std::optional<int32_t> scripted_next_token(std::span<const int32_t> sequence,
                                           std::span<const OutputScript> scripts) {
  size_t best_len = 0;
  const OutputScript* best = nullptr;
  for (const OutputScript& script : scripts) {
    const size_t window = std::min(sequence.size(), script.size());
    const size_t len = longest_suffix_prefix(sequence.subspan(sequence.size() - window), script);
    if (len > best_len) {
      best_len = len;
      best = &script;
    }
  }
  if (best == nullptr) return std::nullopt;
  return (*best)[best_len];
}

ScriptedOutputRunner::ScriptedOutputRunner(std::unique_ptr<ModelRunner> inner,
                                           std::vector<OutputScript> scripts, float bias_margin)
    : inner_(std::move(inner)), scripts_(std::move(scripts)), bias_margin_(bias_margin) {
  for (const OutputScript& s : scripts_) max_script_len_ = std::max(max_script_len_, s.size());
}

KvCacheLayout ScriptedOutputRunner::kv_cache_layout() const {
  KvCacheLayout layout = inner_->kv_cache_layout();
  layout.bytes_per_token += static_cast<int64_t>(sizeof(int32_t));  // the shadow token id
  return layout;
}

Status ScriptedOutputRunner::init_kv_cache(const KvCacheConfig& cfg) {
  DS_TRY(inner_->init_kv_cache(cfg));
  shadow_tokens_.assign(static_cast<size_t>(cfg.n_blocks) * static_cast<size_t>(cfg.block_size_tokens), -1);
  return ok_status();
}

int32_t& ScriptedOutputRunner::shadow_cell(const SequenceState& seq, int64_t position) {
  const int64_t block_size = inner_->kv_cache_config().block_size_tokens;
  const int64_t block = seq.block_table[static_cast<size_t>(position / block_size)];
  return shadow_tokens_[static_cast<size_t>(block * block_size + position % block_size)];
}

Status ScriptedOutputRunner::forward(std::span<const ForwardRequest> requests, LogitsOutput& out) {
  std::vector<int64_t> start_positions;
  start_positions.reserve(requests.size());
  for (const ForwardRequest& r : requests) start_positions.push_back(r.seq->n_tokens);
  // The inner model validates every request (block tables, ranges) and changes nothing on error.
  DS_TRY(inner_->forward(requests, out));
  for (size_t r = 0; r < requests.size(); ++r) {
    for (size_t i = 0; i < requests[r].tokens.size(); ++i)
      shadow_cell(*requests[r].seq, start_positions[r] + static_cast<int64_t>(i)) = requests[r].tokens[i];
  }
  const int64_t vocab = out.logits.shape()[out.logits.shape().rank - 1];
  std::vector<int32_t> window;
  for (size_t r = 0; r < requests.size(); ++r) {
    const ForwardRequest& req = requests[r];
    const int64_t n_rows = out.row_begin[r + 1] - out.row_begin[r];
    const int64_t end = start_positions[r] + static_cast<int64_t>(req.tokens.size());
    for (int64_t row = 0; row < n_rows; ++row) {
      // Row `row` follows the sequence up to position last (the chunk's last n_rows tokens).
      const int64_t last = end - n_rows + row;
      const int64_t first = std::max<int64_t>(0, last + 1 - static_cast<int64_t>(max_script_len_));
      window.clear();
      for (int64_t p = first; p <= last; ++p) window.push_back(shadow_cell(*req.seq, p));
      const std::optional<int32_t> next = scripted_next_token(window, scripts_);
      if (!next || *next < 0 || *next >= vocab) continue;
      float* logits = out.logits.row(out.row_begin[r] + row);  // [vocab]
      logits[*next] = *std::max_element(logits, logits + vocab) + bias_margin_;
      ++n_forced_rows_;
    }
  }
  return ok_status();
}

}  // namespace ds::testing
