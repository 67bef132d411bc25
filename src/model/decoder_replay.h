// Decoder-side SWA bounded replay of DeepSeek-V4.1 (deepinfer-features.md §6.1; DeepInfer's
// DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact and DEEPINFER_YOCO_PREFILL_KEEP_TOKENS=140) as a
// rule, apart from the model that runs it. V4.1 is a causal encoder-decoder: the decoder layers
// (from the last KV source on: the release's 20..39) read compressed KV that the first decoder
// layer's compressor projects from the encoder output, so a prompt token far from the end needs
// only the encoder and that compressor. With the mode `compact`, a prefill runs the decoder layers
// only on the prompt's last keep_tokens positions [prompt_len − keep, prompt_len) (and every
// position after it); the first decoder layer's compressor and index keys still see every prompt
// row, so the paged caches are exact and prefix-cacheable. The decoder's window attention starts
// at the cut (its rings never hold an earlier row). `off` runs every layer on every row (exact).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "weights/layer_spec.h"

namespace ds {

struct DecoderReplayOptions {
  bool compact = false;       // DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE: off (exact) | compact
  int64_t keep_tokens = 140;  // DEEPINFER_YOCO_PREFILL_KEEP_TOKENS: the release's 128 window + 12

  bool operator==(const DecoderReplayOptions&) const = default;
};

// "off" | "compact" (DeepInfer's spelling) -> compact; invalid_argument naming `what` otherwise.
Result<bool> parse_decoder_replay_mode(const std::string& text, const std::string& what);
// A positive count; invalid_argument naming `what` otherwise.
Result<int64_t> parse_decoder_replay_keep(const std::string& text, const std::string& what);

// The first decoder layer of a V4.1 layer list: its last KV source (every later main layer reads
// that source's cache and index keys), or -1 when the model has no compressed layer.
int decoder_first_layer(const std::vector<LayerSpec>& specs, int n_main_layers);

// The first position whose rows run the decoder layers: prompt_len − keep_tokens (at least 0)
// with `compact` and a known prompt length (> 0); 0 otherwise (every row).
int64_t decoder_first_position(const DecoderReplayOptions& o, int64_t prompt_len);

}  // namespace ds
