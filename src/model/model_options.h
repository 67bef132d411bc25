// Run-time choices of the model that the checkpoint does not fix (numerics.md records the defaults).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "model/decoder_replay.h"

namespace ds {

class ExpertExchange;

// Absorbed MLA (q_nope·W_uk against the latent cache, W_uv after) is the default for prefill and
// decode: every token then runs the same arithmetic whatever the chunking, which the engine's
// batch invariance relies on. Plain (K/V up-projected from the cache, standard multi-head
// attention) is kept as a cross-check.
enum class MlaMode { absorbed, plain };

// Which hidden state of the main model feeds the MTP layer's hnorm (numerics.md, MTP):
// post_norm = after the final RMSNorm (vLLM/SGLang), pre_norm = the residual stream before it.
enum class MtpInput { post_norm, pre_norm };

struct ModelOptions {
  Isa isa = Isa::reference;
  int n_threads = 1;
  MlaMode mla_mode = MlaMode::absorbed;
  MtpInput mtp_input = MtpInput::post_norm;
  int64_t max_seq_len = 4096;  // per sequence; longer is model_bad_input
  // The model's numerics options as `--numerics` spells them ("" = production); each model's
  // factory (model_registry.cpp) parses its own (V4: v4_numerics_options.h; docs/numerics.md).
  std::string numerics;
  // V4.1 Engram: token id -> compressed id, built from the checkpoint's own tokenizer by the caller
  // (the model module does not read tokenizers: engine/model_loader.h does it). Null for models
  // without Engram; a V4.1 checkpoint with Engram refuses to load without it.
  std::shared_ptr<const std::vector<int32_t>> engram_token_map;
  // Expert parallelism (docs/expert-parallel.md): not owned, outlives the model. When set, only
  // the experts it owns are loaded and every MoE layer runs its routed experts through it.
  ExpertExchange* expert_exchange = nullptr;
  // `bf16_activations=on` in --numerics, taken out of the text by the registry for every model:
  // linears over bf16/fp8/fp4 weights round x and W to bf16 (vdpbf16ps on AVX-512 BF16). Off by default.
  bool bf16_activations = false;
  // DeepSeek-V4.1 decoder-side SWA bounded replay (model/decoder_replay.h; the CLI's
  // --yoco-prefill-truncation-mode / --yoco-prefill-keep-tokens and DeepInfer's environment
  // variables). Off = exact; another model refuses `compact` (model_unsupported).
  DecoderReplayOptions decoder_replay;
};

}  // namespace ds
