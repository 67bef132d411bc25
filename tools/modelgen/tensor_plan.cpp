#include "tensor_plan.h"

#include <algorithm>
#include <string>

namespace ds::modelgen {
namespace {

class PlanBuilder {
 public:
  explicit PlanBuilder(const ModelConfig& c) : c_(c), fp8_(c.quantization.quant_method == "fp8") {}

  // A Linear weight [out, in]; FP8 in fp8 mode unless `keep_bf16`.
  void linear(const std::string& name, int64_t out, int64_t in, float gain = 1.0f, bool keep_bf16 = false) {
    const DType dtype = (fp8_ && !keep_bf16) ? DType::f8_e4m3 : DType::bf16;
    plan_.push_back({name, Shape{out, in}, dtype, InitKind::linear, gain});
  }
  void norm(const std::string& name, int64_t n) {
    plan_.push_back({name, Shape{n}, DType::bf16, InitKind::norm});
  }
  void embedding(const std::string& name) {
    plan_.push_back({name, Shape{c_.vocab_size, c_.hidden_size}, DType::bf16, InitKind::embedding});
  }

  // Attention, norms and FFN of decoder layer `layer` (also used for the MTP block).
  void decoder_layer(int layer) {
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    const int64_t h = c_.hidden_size;
    const int64_t n_heads = c_.num_attention_heads;
    norm(p + "input_layernorm.weight", h);
    norm(p + "post_attention_layernorm.weight", h);
    const std::string a = p + "self_attn.";
    if (c_.q_lora_rank > 0) {
      linear(a + "q_a_proj.weight", c_.q_lora_rank, h);
      norm(a + "q_a_layernorm.weight", c_.q_lora_rank);
      linear(a + "q_b_proj.weight", n_heads * c_.qk_head_dim(), c_.q_lora_rank);
    } else {
      linear(a + "q_proj.weight", n_heads * c_.qk_head_dim(), h);
    }
    linear(a + "kv_a_proj_with_mqa.weight", c_.kv_lora_rank + c_.qk_rope_head_dim, h);
    norm(a + "kv_a_layernorm.weight", c_.kv_lora_rank);
    linear(a + "kv_b_proj.weight", n_heads * (c_.qk_nope_head_dim + c_.v_head_dim), c_.kv_lora_rank);
    linear(a + "o_proj.weight", h, n_heads * c_.v_head_dim, kResidualGain);
    const std::string m = p + "mlp.";
    if (!c_.is_moe_layer(layer)) {
      mlp(m, c_.intermediate_size);
      return;
    }
    // The router stays BF16 (as released); its bias is F32.
    linear(m + "gate.weight", c_.n_routed_experts, h, 1.0f, /*keep_bf16=*/true);
    plan_.push_back(
        {m + "gate.e_score_correction_bias", Shape{c_.n_routed_experts}, DType::f32, InitKind::gate_bias});
    for (int e = 0; e < c_.n_routed_experts; ++e) {
      mlp(m + "experts." + std::to_string(e) + ".", c_.moe_intermediate_size);
    }
    if (c_.n_shared_experts > 0) {
      mlp(m + "shared_experts.", int64_t{c_.moe_intermediate_size} * c_.n_shared_experts);
    }
  }

  std::vector<TensorSpec> finish() && {
    std::sort(plan_.begin(), plan_.end(),
              [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
    return std::move(plan_);
  }

 private:
  // o_proj and down_proj write into the residual stream; a smaller gain keeps it O(1).
  static constexpr float kResidualGain = 0.5f;

  void mlp(const std::string& p, int64_t width) {
    linear(p + "gate_proj.weight", width, c_.hidden_size);
    linear(p + "up_proj.weight", width, c_.hidden_size);
    linear(p + "down_proj.weight", c_.hidden_size, width, kResidualGain);
  }

  const ModelConfig& c_;
  bool fp8_;
  std::vector<TensorSpec> plan_;
};

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

std::vector<TensorSpec> plan_deepseek_v3_tensors(const ModelConfig& c) {
  PlanBuilder b(c);
  b.embedding("model.embed_tokens.weight");
  for (int layer = 0; layer < c.num_hidden_layers; ++layer) b.decoder_layer(layer);
  b.norm("model.norm.weight", c.hidden_size);
  b.linear("lm_head.weight", c.vocab_size, c.hidden_size, 1.0f, /*keep_bf16=*/true);
  for (int k = 0; k < c.num_nextn_predict_layers; ++k) {
    const int layer = c.num_hidden_layers + k;
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    // The released V3 stores its own copies of the embedding and head in the MTP layer; here they
    // get their own random values, so an engine that silently used the main ones would be caught.
    b.embedding(p + "embed_tokens.weight");
    b.norm(p + "enorm.weight", c.hidden_size);
    b.norm(p + "hnorm.weight", c.hidden_size);
    // eh_proj is BF16 in the released V3 (vLLM and SGLang build it as an unquantised Linear).
    b.linear(p + "eh_proj.weight", c.hidden_size, 2 * int64_t{c.hidden_size}, 1.0f, /*keep_bf16=*/true);
    b.norm(p + "shared_head.norm.weight", c.hidden_size);
    b.linear(p + "shared_head.head.weight", c.vocab_size, c.hidden_size, 1.0f, /*keep_bf16=*/true);
    b.decoder_layer(layer);
  }
  return std::move(b).finish();
}

std::string TensorSpec::scale_name() const {
  if (scale_format == ScaleFormat::f32_scale_inv) return name + "_scale_inv";
  const std::string suffix = ".weight";
  const bool has_suffix = name.size() > suffix.size() && name.ends_with(suffix);
  return (has_suffix ? name.substr(0, name.size() - suffix.size()) : name) + ".scale";
}

Shape TensorSpec::scale_shape() const {
  if (fp4()) return Shape{shape[0], in_features() / kFp4Group};
  const int64_t tile_h = fp8_tile_rows > 0 ? fp8_tile_rows : fp8_block;
  return Shape{(shape[0] + tile_h - 1) / tile_h, (shape[1] + fp8_block - 1) / fp8_block};
}

std::vector<TensorSpec> plan_tensors(const ModelConfig& config) {
  if (config.is_v41()) return plan_deepseek_v41_tensors(config);
  return config.is_v4() ? plan_deepseek_v4_tensors(config) : plan_deepseek_v3_tensors(config);
}

size_t stored_bytes(const TensorSpec& spec) {
  size_t bytes = static_cast<size_t>(spec.shape.numel()) * dtype_size(spec.dtype);
  if (spec.block_quantized()) {
    bytes += static_cast<size_t>(spec.scale_shape().numel()) * dtype_size(spec.scale_dtype());
  }
  return bytes;
}

ModelBytes model_bytes(const ModelConfig& c, const std::vector<TensorSpec>& plan) {
  ModelBytes out;
  const double expert_fraction =
      c.n_routed_experts > 0 ? static_cast<double>(c.num_experts_per_tok) / c.n_routed_experts : 0.0;
  double main_active = 0;
  double mtp_active = 0;
  for (const TensorSpec& t : plan) {
    const size_t bytes = stored_bytes(t);
    out.total += bytes;
    double active = static_cast<double>(bytes);
    // A token reads one row of the embedding tables (V3 `embed_tokens`, V4 `embed`) and of the
    // V4 hash-routing tables.
    if (contains(t.name, "embed_tokens") || t.name == "embed.weight" || contains(t.name, ".tid2eid")) {
      active = static_cast<double>(t.shape[1]) * dtype_size(t.dtype);
    } else if (contains(t.name, ".mlp.experts.") || contains(t.name, ".ffn.experts.")) {
      active = bytes * expert_fraction;
    }
    // MTP layers: V3 numbers them from num_hidden_layers on ("model.layers.3." must not match
    // "model.layers.30.", hence the trailing dot); V4 names them `mtp.K.`.
    bool is_mtp = t.name.rfind("mtp.", 0) == 0;
    for (int k = 0; k < c.num_nextn_predict_layers && !c.is_v4_family(); ++k) {
      if (t.name.rfind("model.layers." + std::to_string(c.num_hidden_layers + k) + ".", 0) == 0) {
        is_mtp = true;
      }
    }
    (is_mtp ? mtp_active : main_active) += active;
  }
  out.active_per_token = static_cast<size_t>(main_active);
  out.mtp_active_per_token = static_cast<size_t>(mtp_active);
  return out;
}

}  // namespace ds::modelgen
