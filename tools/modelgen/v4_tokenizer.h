// The tokenizer files `make-model --arch deepseek_v4` writes: the V3 tokenizer (the 128k BPE
// vocabulary DeepSeek keeps across V3, V3.1 and V4) plus the template markers the V4 prompt
// encoding needs as added tokens (<think>, </think>, ｜DSML｜, <｜latest_reminder｜>), so that
// `serve` and `generate --chat` work on a generated V4 checkpoint (docs/models.md, "V4 tokenizer").
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ds::modelgen {

struct V4Marker {
  std::string_view content;
  // The id the real tokenizer uses, where the model spec gives it (-1: unknown; the marker gets
  // the next free id after every existing token).
  int32_t known_id = -1;
};

// model spec §7: V3.1 and V4 share the role and think tokens; <think> / </think> are 128798 /
// 128799 there (two of V3's placeholder slots). The DSML prefix and <｜latest_reminder｜> are
// new in V4 and their ids are not in the spec.
inline constexpr V4Marker kV4Markers[] = {
    {"<think>", 128798},
    {"</think>", 128799},
    {"｜DSML｜", -1},
    {"<｜latest_reminder｜>", -1},
};

// V4.1 adds <｜System｜> (model-spec §7; id not in the spec) and the image placeholder, whose id
// 129264 is in config.json (image_token_id).
inline constexpr V4Marker kV41Markers[] = {
    {"<think>", 128798},           {"</think>", 128799}, {"｜DSML｜", -1},
    {"<｜latest_reminder｜>", -1}, {"<｜System｜>", -1}, {"<｜deepseek_image｜>", 129264},
};

struct TokenizerFiles {
  std::string tokenizer_json;
  std::string config_json;
};

// Adds `markers` to a tokenizer.json as added tokens with special = false (the engine decodes its
// output with special tokens skipped, and the output parser must see these markers as text) and
// normalized = false. A marker already present is kept as is. A marker with a known id takes that
// id when the slot is free or holds a placeholder (<｜place▁holder▁no▁N｜>); otherwise, and for
// markers without a known id, it gets the next id after the highest vocab or added id. Every id
// must be below vocab_size (the checkpoint's embedding rows). tokenizer_config.json loses V3's
// chat_template (V4 ships none; prompts are rendered by src/recipe) and, when it has an
// added_tokens_decoder, gains the new entries. Errors: invalid_argument naming `source` for JSON
// that is not a tokenizer.json / tokenizer_config.json or for ids that do not fit.
Result<TokenizerFiles> add_template_markers(std::string_view tokenizer_json, std::string_view config_json,
                                            std::span<const V4Marker> markers, int64_t vocab_size,
                                            const std::string& source);

}  // namespace ds::modelgen
