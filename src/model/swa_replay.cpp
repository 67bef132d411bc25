#include "model/swa_replay.h"

#include <algorithm>

namespace ds {

namespace {

Status bad_input(const std::string& what) { return Status(ErrorCode::model_bad_input, what); }

}  // namespace

SwaReplay::SwaReplay(const ModelConfig& cfg, const std::vector<LayerSpec>& specs, int32_t block_multiple)
    : tokens_(cfg.sliding_window), block_multiple_(block_multiple) {
  for (int layer = 0; layer < cfg.num_hidden_layers; ++layer) {
    if (specs[layer].overlap) tokens_ = std::max(tokens_, static_cast<int32_t>(specs[layer].compress_ratio));
  }
  // V4.1 Engram hashes each token with the max_ngram_size − 1 before it, which a replay does not
  // have for its first rows: start that many earlier, so the rows hashed without their history
  // leave the window rings before replay_end (their ring slots are overwritten).
  if (cfg.engram) tokens_ += cfg.engram->max_ngram_size - 1;
}

Status SwaReplay::check(const SequenceState& seq, int64_t replay_end, const std::string& which) const {
  const int64_t w = tokens_;
  if (replay_end < w || replay_end % block_multiple_ != 0) {
    return bad_input(which + "replay_end " + std::to_string(replay_end) + " must be a multiple of " +
                     std::to_string(block_multiple_) + " of at least the replay length " + std::to_string(w));
  }
  if (seq.n_tokens < replay_end - w || seq.n_tokens >= replay_end) {
    return bad_input(which + "a chunk at position " + std::to_string(seq.n_tokens) + " with replay_end " +
                     std::to_string(replay_end) + " is outside the replay [" +
                     std::to_string(replay_end - w) + ", " + std::to_string(replay_end) + ")");
  }
  return ok_status();
}

}  // namespace ds
