// The list of tensors of a DeepSeek checkpoint (V3 in Hugging Face naming, V4 in DeepSeek's own),
// with shapes, stored dtypes and how to initialise each one. Pure bookkeeping: no bytes, testable
// on its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "weights/model_config.h"

namespace ds::modelgen {

enum class InitKind {
  linear,      // N(0,1)·gain/sqrt(in_features): keeps activations O(1) through the layers
  norm,        // 1 + 0.1·N(0,1): RMSNorm weights near one, but not all equal
  embedding,   // N(0,1): embedding rows (followed by RMSNorm, so the scale is free)
  gate_bias,   // 0.1·N(0,1): router bias shifts selection a little; also V4 compressor `ape`
  hc_base,     // 0.1·N(0,1): mHC biases near 0, so pre ≈ 0.5, post ≈ 1 and C ≈ uniform
  hc_scale,    // 0.5 + 0.1·N(0,1): mHC gains on the mixes (fan-in-normalised, so O(1))
  attn_sink,   // N(0,1): a sink logit on the scale of the attention logits
  expert_ids,  // V4 `tid2eid`: per token row, `id_range`-bounded distinct expert ids
};

// How the block scales of a quantised weight are stored.
enum class ScaleFormat {
  f32_scale_inv,  // V3: `<name>_scale_inv` F32 per 128×128 tile
  e8m0,           // V4: `<prefix>.scale` F8_E8M0 (power of two) per 128×128 tile, or per 1×32 for FP4
};

struct TensorSpec {
  std::string
      name;     // full name, e.g. "model.layers.1.self_attn.q_a_proj.weight" or "layers.1.attn.wq_a.weight"
  Shape shape;  // as stored: [out, in] for linear layers, [out, in / 2] for packed FP4 (I8)
  DType dtype;  // f8_e4m3 and i8 (packed FP4) also get block scales (scale_name())
  InitKind init;
  float gain = 1.0f;  // extra factor for InitKind::linear (residual-output projections use 0.5)
  ScaleFormat scale_format = ScaleFormat::f32_scale_inv;
  int64_t id_range = 0;       // InitKind::expert_ids: ids are drawn from [0, id_range)
  int64_t fp8_block = 128;    // FP8 tile edge (quantization_config.weight_block_size; V4.1: 32)
  int64_t fp8_tile_rows = 0;  // > 0: tiles of fp8_tile_rows × fp8_block (V4.1 Engram tables: 1 × 32)

  bool block_quantized() const { return dtype == DType::f8_e4m3 || dtype == DType::i8; }
  bool fp4() const { return dtype == DType::i8; }
  // Logical input width: packed FP4 holds two values per byte.
  int64_t in_features() const { return shape[shape.rank - 1] * (fp4() ? 2 : 1); }
  // "...weight_scale_inv" (V3) or "<prefix>.scale" for "<prefix>.weight" (V4).
  std::string scale_name() const;
  DType scale_dtype() const { return scale_format == ScaleFormat::e8m0 ? DType::f8_e8m0 : DType::f32; }
  // FP8: [ceil(out/tile rows), ceil(in/fp8_block)]; FP4: [out, in/32].
  Shape scale_shape() const;
};

// FP8 block edge of the generated checkpoints (quantization_config.weight_block_size).
constexpr int64_t kFp8Block = 128;
// Inputs per E8M0 scale of a packed FP4 expert row.
constexpr int64_t kFp4Group = 32;

// Every tensor of the checkpoint, sorted by name (the order the shards store them). In fp8 mode
// (config.quantization.quant_method == "fp8") every Linear weight is F8_E4M3 except the router
// gate, eh_proj, the embeddings and the LM heads, which stay BF16 as in the released V3.
std::vector<TensorSpec> plan_deepseek_v3_tensors(const ModelConfig& config);

// DeepSeek-V4 (model-spec §6.1): DeepSeek's own names without `model.` prefix, F8_E4M3 Linear
// weights with E8M0 `.scale` per 128×128 tile, routed experts packed FP4 (I8 [out, in/2] + E8M0
// `.scale` [out, in/32]) when expert_dtype is fp4, BF16 router/compressor/indexer weights_proj,
// F32 mHC/attn_sink/ape/gate.bias, I64 tid2eid on hash layers, and `mtp.K.*` draft blocks. With
// no quantization_config every Linear weight is BF16 (and expert_dtype must be empty).
std::vector<TensorSpec> plan_deepseek_v4_tensors(const ModelConfig& config);

// DeepSeek-V4.1 (model-spec §6.2): V4's names with FP8 tiles of 32×32, no hc_head and no
// compressor `ape`; compressors (wkv, plus wgate for ratio > 1) and index keys (indexer.wk,
// k_norm) only on kv_source_layer_ids, indexer queries (wq_b, weights_proj) only on
// index_source_layer_ids, `gate.bias` and `gate.bias_vl` on every layer. No Engram tables and no
// DSpark stages yet (the tiny preset has neither).
std::vector<TensorSpec> plan_deepseek_v41_tensors(const ModelConfig& config);

// The plan for config.model_type.
std::vector<TensorSpec> plan_tensors(const ModelConfig& config);

// Bytes the tensor occupies on disk, its block scales included.
size_t stored_bytes(const TensorSpec& spec);

struct ModelBytes {
  size_t total = 0;                 // everything written (MTP layer included)
  size_t active_per_token = 0;      // main model: one embedding (and tid2eid) row, all dense
                                    // weights, the top-k routed experts of each MoE layer, the head
  size_t mtp_active_per_token = 0;  // the same for one MTP step
};
ModelBytes model_bytes(const ModelConfig& config, const std::vector<TensorSpec>& plan);

}  // namespace ds::modelgen
