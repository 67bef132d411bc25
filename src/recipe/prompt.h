// A rendered prompt: a sequence of segments, each either a template marker (becomes exactly one
// special token id, looked up by its text in the served tokenizer.json) or plain text (encoded as
// BPE with special-token parsing off, so "<｜User｜>" typed by a user stays ordinary text).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace ds::recipe {

enum class SegmentKind { marker, text };

struct PromptSegment {
  SegmentKind kind = SegmentKind::text;
  std::string text;
};

struct RenderedPrompt {
  std::vector<PromptSegment> segments;
  std::string encoding_name;  // "deepseek_v41", for error messages
  // Where the model's output starts, for the output parser (features spec §10.4):
  bool generation_in_reasoning = false;   // the prompt ends inside an open <think>
  bool generation_in_tool_calls = false;  // a forced tool choice opened the DSML calls block
  // DSML encodings: the tags of the tool-call block the model writes (strict tool calls build their
  // grammar from them); empty for other encodings.
  std::string dsml_calls_tag, dsml_invoke_tag, dsml_parameter_tag;

  // The prompt as one string (markers written as their text): what golden tests compare.
  std::string text() const;
};

// Builds segments; adjacent text pieces are merged so BPE sees them as one run (as it would in the
// reference encoders, which tokenize the whole string at once).
class PromptBuilder {
 public:
  void marker(std::string_view token_text);
  void text(std::string_view plain);
  // Trusted template text that may contain marker strings (e.g. "｜DSML｜" inside the tools
  // section): each occurrence of a string in `markers` becomes a marker segment. Never use this
  // for client-supplied text.
  void template_text(std::string_view text, const std::vector<std::string_view>& markers);
  std::vector<PromptSegment> take() { return std::move(segments_); }

 private:
  std::vector<PromptSegment> segments_;
};

// Token ids of a rendered prompt: markers by token_to_id (an error names a marker the tokenizer
// lacks, e.g. "<｜System｜>" with a V3 tokenizer.json), text by encode(text, parse_special=false).
// Never adds anything: BOS is the encoding's first marker.
Result<std::vector<int32_t>> tokenize_prompt(const RenderedPrompt& prompt, const Tokenizer& tokenizer);

}  // namespace ds::recipe
