// DeepSeek-V4.1-Flash (model_type deepseek_v41, model-spec §5): the factory the model registry
// calls. V4.1 composes the V4 blocks (model/deepseek_v4.h runs both) with its own layer specs
// (weights/layer_spec.h: CSA2 KV sources and readers, index sources and reusers, the candidate
// pool) and the blocks' V4.1 options: delayed mHC pre and no hyper-head, no per-head q norm
// (switch q_head_norm), FP8 window KV over all channels in 32-blocks, ungated / gated compressors
// without ape, index keys from the KV source's latent without Hadamard, FP4 caches, MoE with the
// bias on every layer, gate_temp and w/(Σ+1e-20); Engram (v41_engram.h); decoder-side SWA bounded
// replay (decoder_replay.h); the release's index-key publishing as `--numerics index_keys=on_group`
// (spec §9; default: every step). Not yet: DSpark stages (not loaded), vision (skipped).
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "model/model_options.h"
#include "model/model_runner.h"
#include "weights/model_config.h"

namespace ds {

// `--numerics` items as for V4 (v4_numerics_options.h), q_head_norm defaulting to off.
// `cfg`: dir's parsed config.json.
Result<std::unique_ptr<ModelRunner>> load_deepseek_v41(const std::string& dir, const ModelConfig& cfg,
                                                       const ModelOptions& opts);

}  // namespace ds
