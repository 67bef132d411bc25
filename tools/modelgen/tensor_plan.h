// The list of tensors of a DeepSeek-V3 checkpoint in Hugging Face naming, with shapes, stored
// dtypes and how to initialise each one. Pure bookkeeping: no bytes, testable on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "weights/model_config.h"

namespace ds::modelgen {

enum class InitKind {
  linear,     // N(0,1)·gain/sqrt(in_features): keeps activations O(1) through the layers
  norm,       // 1 + 0.1·N(0,1): RMSNorm weights near one, but not all equal
  embedding,  // N(0,1): embedding rows (followed by RMSNorm, so the scale is free)
  gate_bias,  // 0.1·N(0,1): e_score_correction_bias shifts selection a little
};

struct TensorSpec {
  std::string name;  // full HF name, e.g. "model.layers.1.self_attn.q_a_proj.weight"
  Shape shape;       // [out, in] for linear layers
  DType dtype;       // stored dtype; f8_e4m3 also gets "<name>_scale_inv" F32 per 128×128 block
  InitKind init;
  float gain = 1.0f;  // extra factor for InitKind::linear (residual-output projections use 0.5)

  bool block_quantized() const { return dtype == DType::f8_e4m3; }
  std::string scale_name() const { return name + "_scale_inv"; }  // "...weight_scale_inv"
};

// FP8 block edge of the generated checkpoints (quantization_config.weight_block_size).
constexpr int64_t kFp8Block = 128;

// Every tensor of the checkpoint, sorted by name (the order the shards store them). In fp8 mode
// (config.quantization.quant_method == "fp8") every Linear weight is F8_E4M3 except the router
// gate, eh_proj, the embeddings and the LM heads, which stay BF16 as in the released V3.
std::vector<TensorSpec> plan_deepseek_v3_tensors(const ModelConfig& config);

// Bytes the tensor occupies on disk, its block scales included.
size_t stored_bytes(const TensorSpec& spec);

struct ModelBytes {
  size_t total = 0;                 // everything written (MTP layer included)
  size_t active_per_token = 0;      // main model: one embedding row, all dense weights, the
                                    // top-k routed experts of each MoE layer, lm_head
  size_t mtp_active_per_token = 0;  // the same for one MTP step
};
ModelBytes model_bytes(const ModelConfig& config, const std::vector<TensorSpec>& plan);

}  // namespace ds::modelgen
