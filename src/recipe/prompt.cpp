#include "recipe/prompt.h"

#include <fmt/format.h>

#include "recipe/request_error.h"

namespace ds::recipe {

std::string RenderedPrompt::text() const {
  std::string out;
  for (const PromptSegment& s : segments) out += s.text;
  return out;
}

void PromptBuilder::marker(std::string_view token_text) {
  segments_.push_back({SegmentKind::marker, std::string(token_text)});
}

void PromptBuilder::text(std::string_view plain) {
  if (plain.empty()) return;
  if (!segments_.empty() && segments_.back().kind == SegmentKind::text) {
    segments_.back().text += plain;
    return;
  }
  segments_.push_back({SegmentKind::text, std::string(plain)});
}

void PromptBuilder::template_text(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos;
    std::string_view best_marker;
    for (std::string_view m : markers) {
      const size_t at = text.find(m, pos);
      if (at != std::string_view::npos && (best == std::string_view::npos || at < best)) {
        best = at;
        best_marker = m;
      }
    }
    if (best == std::string_view::npos) {
      this->text(text.substr(pos));
      return;
    }
    this->text(text.substr(pos, best - pos));
    marker(best_marker);
    pos = best + best_marker.size();
  }
}

Result<std::vector<int32_t>> tokenize_prompt(const RenderedPrompt& prompt, const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  for (const PromptSegment& s : prompt.segments) {
    if (s.kind == SegmentKind::marker) {
      const std::optional<int32_t> id = tokenizer.token_to_id(s.text);
      if (!id.has_value())
        return field_error("",
                           fmt::format("prompt marker '{}' is not a token of this tokenizer; the {} encoding "
                                       "needs the tokenizer.json of a model that has it",
                                       s.text, prompt.encoding_name),
                           kUnsupported);
      ids.push_back(*id);
      continue;
    }
    DS_ASSIGN_OR_RETURN(std::vector<int32_t> piece, tokenizer.encode(s.text, /*parse_special=*/false));
    ids.insert(ids.end(), piece.begin(), piece.end());
  }
  return ids;
}

}  // namespace ds::recipe
