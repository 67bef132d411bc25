#include "model/decoder_replay.h"

#include <charconv>

namespace ds {

Result<bool> parse_decoder_replay_mode(const std::string& text, const std::string& what) {
  if (text == "off") return false;
  if (text == "compact") return true;
  return Status(ErrorCode::invalid_argument, what + ": '" + text + "': expected off or compact");
}

Result<int64_t> parse_decoder_replay_keep(const std::string& text, const std::string& what) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < 1)
    return Status(ErrorCode::invalid_argument, what + ": '" + text + "': expected a positive token count");
  return v;
}

int decoder_first_layer(const std::vector<LayerSpec>& specs, int n_main_layers) {
  int last = -1;
  for (int l = 0; l < n_main_layers && l < static_cast<int>(specs.size()); ++l)
    if (specs[l].compress_ratio > 0 && specs[l].owns_compressor()) last = l;
  return last;
}

int64_t decoder_first_position(const DecoderReplayOptions& o, int64_t prompt_len) {
  if (!o.compact || prompt_len <= 0) return 0;
  return prompt_len > o.keep_tokens ? prompt_len - o.keep_tokens : 0;
}

}  // namespace ds
