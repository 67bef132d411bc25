// The DeepSeek-V4 and V4.1 tensor lists (model-spec §6.1, §6.2), in DeepSeek's own names:
// `embed.weight`, `layers.N.{attn,ffn,hc_*}`, `mtp.K.*`, `head.weight`, no `model.` prefix.
#include <algorithm>
#include <string>

#include "tensor_plan.h"

namespace ds::modelgen {
namespace {

class V4PlanBuilder {
 public:
  explicit V4PlanBuilder(const ModelConfig& c)
      : c_(c),
        fp8_(c.quantization.quant_method == "fp8"),
        block_(fp8_ ? c.quantization.block_rows : kFp8Block) {}

  // A Linear weight `<prefix>.weight` [out, in]: F8_E4M3 + E8M0 `.scale` in an fp8 checkpoint.
  void linear(const std::string& prefix, int64_t out, int64_t in, float gain = 1.0f) {
    if (!fp8_) return bf16_linear(prefix, out, in, gain);
    TensorSpec t{prefix + ".weight", Shape{out, in}, DType::f8_e4m3,
                 InitKind::linear,   gain,           ScaleFormat::e8m0};
    t.fp8_block = block_;
    plan_.push_back(std::move(t));
  }
  // Weights the release keeps in BF16 (router, compressors, indexer weights_proj, head).
  void bf16_linear(const std::string& prefix, int64_t out, int64_t in, float gain = 1.0f) {
    plan_.push_back({prefix + ".weight", Shape{out, in}, DType::bf16, InitKind::linear, gain});
  }
  void norm(const std::string& name, int64_t n) {
    plan_.push_back({name, Shape{n}, DType::bf16, InitKind::norm});
  }
  void f32(const std::string& name, Shape shape, InitKind init) {
    plan_.push_back({name, shape, DType::f32, init});
  }
  // `embed.weight` and `head.weight` [vocab, hidden] stay BF16 as released.
  void embedding_and_head() {
    plan_.push_back({"embed.weight", Shape{c_.vocab_size, c_.hidden_size}, DType::bf16, InitKind::embedding});
    bf16_linear("head", c_.vocab_size, c_.hidden_size);
  }

  // mHC parameters of one sublayer (`hc_attn_*` or `hc_ffn_*`) or of a head (`hc_head_*`).
  void mhc(const std::string& prefix, int64_t n_mix, int64_t n_scales) {
    const int64_t hc_dim = int64_t{c_.hc_mult} * c_.hidden_size;
    f32(prefix + "_fn", Shape{n_mix, hc_dim}, InitKind::linear);
    f32(prefix + "_base", Shape{n_mix}, InitKind::hc_base);
    f32(prefix + "_scale", Shape{n_scales}, InitKind::hc_scale);
  }

  // Block `layer` (main layers, then draft layers) under `p` ("layers.N." or "mtp.K.").
  void block(const std::string& p, int layer) {
    block_common(p);
    attention(p + "attn.", layer);
    ffn(p + "ffn.", layer);
  }

  // Norms and mHC of a block.
  void block_common(const std::string& p) {
    const int64_t d = c_.hidden_size;
    const int64_t hc = c_.hc_mult;
    norm(p + "attn_norm.weight", d);
    norm(p + "ffn_norm.weight", d);
    // pre (hc) + post (hc) + the hc×hc combination matrix; three gains, one per set.
    mhc(p + "hc_attn", (2 + hc) * hc, 3);
    mhc(p + "hc_ffn", (2 + hc) * hc, 3);
  }

  // A V4.1 DSpark stage `mtp.<k>.` (docs/dspark.md): a window-only V4.1 block with the stages'
  // own expert count, no bias_vl or Engram; stage 0 also projects the target features, the last
  // stage has the final norm, the Markov head and the confidence head.
  void dspark_stage(int k) {
    const DsparkConfig& ds = *c_.dspark;
    const std::string p = "mtp." + std::to_string(k) + ".";
    const int64_t d = c_.hidden_size;
    block_common(p);
    attention_common(p + "attn.");
    const int experts = ds.n_routed_experts > 0 ? ds.n_routed_experts : c_.n_routed_experts;
    ffn_with_experts(p + "ffn.", c_.num_hidden_layers + k, experts);
    if (k == 0) {
      linear(p + "main_proj", d, static_cast<int64_t>(ds.target_layer_ids.size()) * d);
      norm(p + "main_norm.weight", d);
    }
    if (k == c_.num_draft_layers() - 1) {
      norm(p + "norm.weight", d);
      plan_.push_back({p + "markov_head.embed.weight", Shape{c_.vocab_size, ds.markov_rank}, DType::bf16,
                       InitKind::embedding});
      bf16_linear(p + "markov_head.head", c_.vocab_size, ds.markov_rank);
      bf16_linear(p + "confidence_head.proj", 1, d + ds.markov_rank);
      f32(p + "confidence_head.proj.bias", Shape{1}, InitKind::gate_bias);
    }
  }

  // V4.1 block (model-spec §6.2): the layer's role decides its compressor and indexer tensors.
  void block_v41(const std::string& p, int layer) {
    block_common(p);
    const std::string a = p + "attn.";
    attention_common(a);
    const int64_t d = c_.hidden_size;
    const auto has = [](const std::vector<int>& ids, int l) {
      return std::find(ids.begin(), ids.end(), l) != ids.end();
    };
    if (has(c_.kv_source_layer_ids, layer)) {
      bf16_linear(a + "compressor.wkv", c_.head_dim, d);
      if (c_.compress_ratio(layer) > 1) bf16_linear(a + "compressor.wgate", c_.head_dim, d);
      norm(a + "compressor.norm.weight", c_.head_dim);
      bf16_linear(a + "indexer.wk", c_.index_head_dim, c_.head_dim);
      norm(a + "indexer.k_norm.weight", c_.index_head_dim);
    }
    if (has(c_.index_source_layer_ids, layer)) {
      linear(a + "indexer.wq_b", int64_t{c_.index_n_heads} * c_.index_head_dim, c_.q_lora_rank);
      bf16_linear(a + "indexer.weights_proj", c_.index_n_heads, d);
    }
    ffn(p + "ffn.", layer);
    f32(p + "ffn.gate.bias_vl", Shape{c_.n_routed_experts}, InitKind::gate_bias);
    if (c_.engram) engram(p + "engram.", layer);
  }

  // V4.1 Engram of `layer` when listed (model-spec §5.7, §6.2): the table F8_E4M3 with one E8M0
  // scale per 32 columns of each row (BF16 without quantization), the FP8 projection to hc keys
  // and one value, and the per-stream q/k weights (dtype [?]: BF16, docs/models.md).
  void engram(const std::string& p, int layer) {
    const EngramConfig& e = *c_.engram;
    const auto it = std::find(e.layer_ids.begin(), e.layer_ids.end(), layer);
    if (it == e.layer_ids.end()) return;
    const int64_t rows = e.num_embeddings[static_cast<size_t>(it - e.layer_ids.begin())];
    if (fp8_) {
      TensorSpec t{p + "embed.weight", Shape{rows, e.head_dim}, DType::f8_e4m3, InitKind::embedding, 1.0f,
                   ScaleFormat::e8m0};
      t.fp8_block = 32;
      t.fp8_tile_rows = 1;
      plan_.push_back(std::move(t));
    } else {
      plan_.push_back({p + "embed.weight", Shape{rows, e.head_dim}, DType::bf16, InitKind::embedding});
    }
    const int64_t hc = c_.hc_mult, d = c_.hidden_size;
    linear(p + "wkv", (hc + 1) * d, int64_t{e.max_ngram_size - 1} * e.n_heads * e.head_dim);
    plan_.push_back({p + "q_weight", Shape{hc, d}, DType::bf16, InitKind::norm});
    plan_.push_back({p + "k_weight", Shape{hc, d}, DType::bf16, InitKind::norm});
  }

  void attention(const std::string& a, int layer) {
    attention_common(a);
    const int ratio = c_.compress_ratio(layer);
    if (ratio == 0) return;
    compressor(a + "compressor.", ratio, c_.head_dim);
    if (c_.attention_kind(layer) != AttentionKind::csa) return;
    linear(a + "indexer.wq_b", int64_t{c_.index_n_heads} * c_.index_head_dim, c_.q_lora_rank);
    bf16_linear(a + "indexer.weights_proj", c_.index_n_heads, c_.hidden_size);
    compressor(a + "indexer.compressor.", ratio, c_.index_head_dim);
  }

  // Projections, norms and sink every V4 / V4.1 attention has.
  void attention_common(const std::string& a) {
    const int64_t d = c_.hidden_size;
    const int64_t n_heads = c_.num_attention_heads;
    const int64_t head_dim = c_.head_dim;
    linear(a + "wq_a", c_.q_lora_rank, d);
    norm(a + "q_norm.weight", c_.q_lora_rank);
    linear(a + "wq_b", n_heads * head_dim, c_.q_lora_rank);
    linear(a + "wkv", head_dim, d);
    norm(a + "kv_norm.weight", head_dim);
    // Group g maps the concatenated outputs of its heads (n_heads/o_groups · head_dim) to o_lora_rank.
    linear(a + "wo_a", int64_t{c_.o_groups} * c_.o_lora_rank, n_heads * head_dim / c_.o_groups);
    linear(a + "wo_b", d, int64_t{c_.o_groups} * c_.o_lora_rank, kResidualGain);
    f32(a + "attn_sink", Shape{n_heads}, InitKind::attn_sink);
  }

  // CSA (ratio 4) pools overlapping groups: two halves of width d_c each ("coff" = 2).
  void compressor(const std::string& p, int ratio, int64_t d_c) {
    const int64_t coff = ratio == kCsaCompressRatio ? 2 : 1;
    f32(p + "ape", Shape{ratio, coff * d_c}, InitKind::gate_bias);
    bf16_linear(p + "wkv", coff * d_c, c_.hidden_size);
    bf16_linear(p + "wgate", coff * d_c, c_.hidden_size);
    norm(p + "norm.weight", d_c);
  }

  void ffn(const std::string& f, int layer) { ffn_with_experts(f, layer, c_.n_routed_experts); }

  void ffn_with_experts(const std::string& f, int layer, int64_t n_experts) {
    const int64_t d = c_.hidden_size;
    bf16_linear(f + "gate", n_experts, d);
    if (c_.is_hash_layer(layer)) {
      TensorSpec ids{f + "gate.tid2eid", Shape{c_.vocab_size, c_.num_experts_per_tok}, DType::i64,
                     InitKind::expert_ids};
      ids.id_range = n_experts;
      plan_.push_back(std::move(ids));
    } else {
      f32(f + "gate.bias", Shape{n_experts}, InitKind::gate_bias);
    }
    const bool fp4 = c_.expert_dtype == "fp4" && fp8_;
    for (int64_t e = 0; e < n_experts; ++e) {
      expert(f + "experts." + std::to_string(e) + ".", c_.moe_intermediate_size, fp4);
    }
    if (c_.n_shared_experts > 0) {
      expert(f + "shared_experts.", int64_t{c_.moe_intermediate_size} * c_.n_shared_experts, false);
    }
  }

  void expert(const std::string& p, int64_t width, bool fp4) {
    const int64_t d = c_.hidden_size;
    if (!fp4) {
      linear(p + "w1", width, d);
      linear(p + "w3", width, d);
      linear(p + "w2", d, width, kResidualGain);
      return;
    }
    auto packed = [&](const std::string& name, int64_t out, int64_t in, float gain) {
      plan_.push_back(
          {name + ".weight", Shape{out, in / 2}, DType::i8, InitKind::linear, gain, ScaleFormat::e8m0});
    };
    packed(p + "w1", width, d, 1.0f);
    packed(p + "w3", width, d, 1.0f);
    packed(p + "w2", d, width, kResidualGain);
  }

  std::vector<TensorSpec> finish() && {
    std::sort(plan_.begin(), plan_.end(),
              [](const TensorSpec& a, const TensorSpec& b) { return a.name < b.name; });
    return std::move(plan_);
  }

 private:
  // wo_b and w2 write into the residual streams; a smaller gain keeps them O(1).
  static constexpr float kResidualGain = 0.5f;

  const ModelConfig& c_;
  bool fp8_;
  int64_t block_;  // FP8 tile edge
  std::vector<TensorSpec> plan_;
};

}  // namespace

std::vector<TensorSpec> plan_deepseek_v4_tensors(const ModelConfig& c) {
  V4PlanBuilder b(c);
  const int64_t d = c.hidden_size;
  b.norm("norm.weight", d);
  b.embedding_and_head();
  for (int layer = 0; layer < c.num_hidden_layers; ++layer)
    b.block("layers." + std::to_string(layer) + ".", layer);
  b.mhc("hc_head", c.hc_mult, 1);
  // Draft blocks share `embed` and `head` with the main model (the release stores no copies).
  for (int k = 0; k < c.num_draft_layers(); ++k) {
    const std::string p = "mtp." + std::to_string(k) + ".";
    b.block(p, c.num_hidden_layers + k);
    b.linear(p + "e_proj", d, d);
    b.linear(p + "h_proj", d, d);
    b.norm(p + "enorm.weight", d);
    b.norm(p + "hnorm.weight", d);
    b.norm(p + "norm.weight", d);
    b.mhc(p + "hc_head", c.hc_mult, 1);
  }
  return std::move(b).finish();
}

std::vector<TensorSpec> plan_deepseek_v41_tensors(const ModelConfig& c) {
  V4PlanBuilder b(c);
  b.norm("norm.weight", c.hidden_size);
  b.embedding_and_head();
  // No hc_head: the final collapse uses the last block's FFN pre (model-spec §5.1).
  for (int layer = 0; layer < c.num_hidden_layers; ++layer)
    b.block_v41("layers." + std::to_string(layer) + ".", layer);
  if (c.dspark) {
    for (int k = 0; k < c.num_draft_layers(); ++k) b.dspark_stage(k);
  }
  return std::move(b).finish();
}

}  // namespace ds::modelgen
