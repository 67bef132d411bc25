// SWA bounded replay (deepinfer-features.md §6.1) as a rule, apart from the model that runs it: on
// a prefix-cache hit at replay_end, a sequence restarts at replay_end − W with empty window rings
// and compressor groups, reading the cached compressed entries below replay_end. W covers the
// window and one group of every overlapping compressor (their state at a block-aligned hit is the
// raw group before it), plus max_ngram_size − 1 tokens when the model has Engram (V4.1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_runner.h"
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds {

class SwaReplay {
 public:
  SwaReplay() = default;
  // W from the window and the main layers' overlapping compressors; replay_end must be a multiple
  // of `block_multiple` (the lcm of the compress ratios).
  SwaReplay(const ModelConfig& cfg, const std::vector<LayerSpec>& specs, int32_t block_multiple);

  int32_t tokens() const { return tokens_; }  // W (KvCacheLayout::swa_replay_tokens)
  // Whether a chunk at seq.n_tokens with this replay_end is the first one of a replay.
  bool starts(const SequenceState& seq, int64_t replay_end) const {
    return replay_end > 0 && seq.n_tokens == replay_end - tokens_;
  }
  // model_bad_input (prefixed by `which`) unless a chunk at seq.n_tokens may carry replay_end. The
  // MTP layer's state is not replayed: it starts at the replay (V4StateSlots::take).
  Status check(const SequenceState& seq, int64_t replay_end, const std::string& which) const;

 private:
  int32_t tokens_ = 0;
  int32_t block_multiple_ = 1;
};

}  // namespace ds
