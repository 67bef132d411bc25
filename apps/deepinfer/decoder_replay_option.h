// --yoco-prefill-truncation-mode / --yoco-prefill-keep-tokens on logits, generate and serve: V4.1
// decoder-side SWA bounded replay (model/decoder_replay.h), named as DeepInfer names it. The
// defaults come from DeepInfer's environment variables DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE
// (off | compact; unset: off) and DEEPINFER_YOCO_PREFILL_KEEP_TOKENS (unset: 140); a flag wins.
#pragma once

#include <string>

#include "base/status.h"
#include "model/decoder_replay.h"

namespace CLI {
class App;
}

namespace ds::cli {

struct DecoderReplayFlags {
  std::string mode;  // "" = from the environment
  std::string keep;  // "" = from the environment
};

void add_decoder_replay_options(CLI::App* sub, DecoderReplayFlags& flags);

// The options: flags over the environment over the defaults; invalid_argument naming the flag or
// the variable.
Result<DecoderReplayOptions> resolve_decoder_replay(const DecoderReplayFlags& flags);

}  // namespace ds::cli
