#include "presets.h"

#include <string>
#include <utility>
#include <vector>

#include "model/engram_hash.h"

namespace ds::modelgen {
namespace {

// Fields every preset shares with the released DeepSeek-V3 config.
ModelConfig v3_common() {
  ModelConfig c;
  c.model_type = "deepseek_v3";
  c.vocab_size = 129280;
  c.num_nextn_predict_layers = 1;
  c.moe_layer_freq = 1;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5;
  c.scoring_func = "sigmoid";
  c.topk_method = "noaux_tc";
  c.hidden_act = "silu";
  c.max_position_embeddings = 163840;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000;
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 40;
  c.rope_scaling.original_max_position_embeddings = 4096;
  c.rope_scaling.beta_fast = 32;
  c.rope_scaling.beta_slow = 1;
  c.rope_scaling.mscale = 1;
  c.rope_scaling.mscale_all_dim = 1;
  c.tie_word_embeddings = false;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

ModelConfig tiny() {
  ModelConfig c = v3_common();
  c.hidden_size = 64;
  c.num_hidden_layers = 3;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 4;
  c.q_lora_rank = 48;
  c.kv_lora_rank = 32;
  c.qk_nope_head_dim = 16;
  c.qk_rope_head_dim = 16;
  c.v_head_dim = 16;
  c.intermediate_size = 128;
  c.moe_intermediate_size = 32;
  c.n_routed_experts = 8;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 2;
  c.n_group = 4;
  c.topk_group = 2;
  return c;
}

ModelConfig small() {
  ModelConfig c = v3_common();
  c.hidden_size = 256;
  c.num_hidden_layers = 4;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 8;
  c.q_lora_rank = 192;
  c.kv_lora_rank = 128;
  c.qk_nope_head_dim = 32;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 32;
  c.intermediate_size = 512;
  c.moe_intermediate_size = 128;
  c.n_routed_experts = 16;
  c.n_shared_experts = 1;
  c.num_experts_per_tok = 4;
  c.n_group = 4;
  c.topk_group = 2;
  return c;
}

// DeepSeek-V2-Lite widths with V3 routing; 3 layers + MTP keep it near 6 GB in BF16.
ModelConfig bench() {
  ModelConfig c = v3_common();
  c.hidden_size = 2048;
  c.num_hidden_layers = 3;
  c.first_k_dense_replace = 1;
  c.num_attention_heads = 16;
  c.q_lora_rank = 1536;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  c.intermediate_size = 10944;
  c.moe_intermediate_size = 1408;
  c.n_routed_experts = 64;
  c.n_shared_experts = 2;
  c.num_experts_per_tok = 6;
  c.n_group = 1;
  c.topk_group = 1;
  return c;
}

}  // namespace

std::vector<std::string_view> preset_names() { return {"tiny", "small", "bench"}; }

Result<ModelConfig> deepseek_v3_preset(std::string_view preset, bool fp8) {
  ModelConfig c;
  if (preset == "tiny") {
    c = tiny();
  } else if (preset == "small") {
    c = small();
  } else if (preset == "bench") {
    c = bench();
  } else {
    return Status(ErrorCode::invalid_argument,
                  "unknown preset '" + std::string(preset) + "' (expected tiny, small or bench)");
  }
  c.num_key_value_heads = c.num_attention_heads;
  if (fp8) {
    c.quantization.quant_method = "fp8";
    c.quantization.fmt = "e4m3";
    c.quantization.activation_scheme = "dynamic";
    c.quantization.block_rows = 128;
    c.quantization.block_cols = 128;
  }
  return c;
}

namespace {

// Fields every V4 preset shares with the released DeepSeek-V4-Flash config (model-spec §2.1).
ModelConfig v4_common() {
  ModelConfig c;
  c.model_type = "deepseek_v4";
  c.vocab_size = 129280;
  c.num_key_value_heads = 1;
  c.num_nextn_predict_layers = 1;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 1.5;
  c.scoring_func = "sqrtsoftplus";
  c.topk_method = "noaux_tc";
  c.hidden_act = "silu";
  c.swiglu_limit = 10.0;
  c.max_position_embeddings = 1048576;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000;
  c.compress_rope_theta = 160000;
  c.rope_scaling.type = "yarn";
  c.rope_scaling.factor = 16;
  c.rope_scaling.original_max_position_embeddings = 65536;
  c.rope_scaling.beta_fast = 32;
  c.rope_scaling.beta_slow = 1;
  c.hc_mult = 4;
  c.hc_sinkhorn_iters = 20;
  c.hc_eps = 1e-6;
  c.n_shared_experts = 1;
  c.num_hash_layers = 3;
  c.tie_word_embeddings = false;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  return c;
}

// The released schedule scaled down: `n_window_only` SWA layers, then CSA/HCA alternating and
// ending on CSA (V4-Flash: 2 + [4, 128]×20 + [4]), then one SWA-only MTP layer.
std::vector<int> v4_schedule(int n_layers, int n_window_only, int hca_ratio) {
  std::vector<int> ratios;
  for (int layer = 0; layer < n_layers; ++layer) {
    const int k = layer - n_window_only;
    ratios.push_back(k < 0 ? 0 : (k % 2 == 0 ? kCsaCompressRatio : hca_ratio));
  }
  ratios.push_back(0);
  return ratios;
}

// ~40 MB, dominated by the 129280-row embedding and head: every layer kind appears (SWA, CSA
// with indexer, HCA; hash-routed and scored MoE), windows and ratios small enough that a
// 40-token prompt exercises compression and top-k selection.
ModelConfig v4_tiny() {
  ModelConfig c = v4_common();
  c.hidden_size = 64;
  c.num_hidden_layers = 5;  // 0-1 SWA, 2 CSA, 3 HCA, 4 CSA; + MTP (SWA)
  c.compress_ratios = v4_schedule(5, 2, 16);
  c.sliding_window = 16;
  c.num_attention_heads = 4;
  c.head_dim = 128;  // 64 non-RoPE channels: one 64-wide FP8 simulation block
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 64;
  c.o_groups = 2;
  c.o_lora_rank = 32;
  c.index_n_heads = 4;
  c.index_head_dim = 128;
  c.index_topk = 8;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 64;
  return c;
}

// Dims of 256-512 so FP8 matrices span several 128×128 tiles (partial edge tiles included).
ModelConfig v4_small() {
  ModelConfig c = v4_common();
  c.hidden_size = 384;
  c.num_hidden_layers = 7;  // 0-1 SWA, then CSA, HCA, CSA, HCA, CSA; + MTP
  c.compress_ratios = v4_schedule(7, 2, 32);
  c.sliding_window = 32;
  c.num_attention_heads = 8;
  c.head_dim = 256;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 192;
  c.o_groups = 4;
  c.o_lora_rank = 128;
  c.index_n_heads = 8;
  c.index_head_dim = 128;
  c.index_topk = 16;
  c.n_routed_experts = 16;
  c.num_experts_per_tok = 4;
  c.moe_intermediate_size = 256;
  return c;
}

// The released per-head widths (head_dim 512, RoPE 64, index 128, window 128, HCA ratio 128)
// with fewer heads, experts and layers: ~3 GB for performance work.
ModelConfig v4_bench() {
  ModelConfig c = v4_common();
  c.hidden_size = 2048;
  c.num_hidden_layers = 7;
  c.compress_ratios = v4_schedule(7, 2, 128);
  c.sliding_window = 128;
  c.num_attention_heads = 16;
  c.head_dim = 512;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 512;
  c.o_groups = 4;
  c.o_lora_rank = 512;
  c.index_n_heads = 16;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.n_routed_experts = 64;
  c.num_experts_per_tok = 6;
  c.moe_intermediate_size = 1024;
  return c;
}

}  // namespace

Result<ModelConfig> deepseek_v4_preset(std::string_view preset, bool fp8) {
  ModelConfig c;
  if (preset == "tiny") {
    c = v4_tiny();
  } else if (preset == "small") {
    c = v4_small();
  } else if (preset == "bench") {
    c = v4_bench();
  } else {
    return Status(ErrorCode::invalid_argument,
                  "unknown preset '" + std::string(preset) + "' (expected tiny, small or bench)");
  }
  if (fp8) {
    c.quantization.quant_method = "fp8";
    c.quantization.fmt = "e4m3";
    c.quantization.activation_scheme = "dynamic";
    c.quantization.scale_fmt = "ue8m0";
    c.quantization.block_rows = 128;
    c.quantization.block_cols = 128;
    c.expert_dtype = "fp4";
  }
  return c;
}

namespace {

// What every V4.1 preset shares: the wrapper's ids, eps 1e-20, no hash layers, gate_temp 1. The
// DSpark stages come from v41_dspark (each preset adds them).
ModelConfig v41_common() {
  ModelConfig c = v4_common();
  c.model_type = "deepseek_v41";
  c.num_nextn_predict_layers = 0;
  c.num_hash_layers = 0;
  c.rms_norm_eps = 1e-20;
  c.pad_token_id = 2;
  c.image_token_id = 129264;
  c.gate_temp = 1.0;
  return c;
}

// Engram before `layers`, n-grams 2..4, tables of Σ primes from `prime_start` rows. The compressed
// vocabulary is counted from the written tokenizer by make_model; vocab_size stands in until then.
void v41_engram(ModelConfig& c, std::vector<int> layers, int n_heads, int head_dim, int prime_start) {
  EngramConfig e;
  e.layer_ids = std::move(layers);
  e.max_ngram_size = 4;
  e.vocab_size = prime_start;
  e.n_heads = n_heads;
  e.head_dim = head_dim;
  e.pad_token_id = 2;
  e.compressed_vocab_size = c.vocab_size;
  e.num_embeddings = engram_table_rows(e);
  c.engram = std::move(e);
}

// DSpark stages as released (model-spec §2.2, §5.9; docs/dspark.md): 3 window-only stages after the
// main layers, fed by the last three main layers' states, blocks of 5 with the release's noise id,
// a Markov head of `rank` and `experts` routed experts a stage, `top_k` of them per token.
void v41_dspark(ModelConfig& c, int rank, int experts, int top_k) {
  constexpr int kStages = 3;
  DsparkConfig d;
  for (int l = c.num_hidden_layers - kStages; l < c.num_hidden_layers; ++l) d.target_layer_ids.push_back(l);
  d.block_size = 5;
  d.noise_token_id = 128799;
  d.markov_rank = rank;
  d.n_routed_experts = experts;
  d.num_experts_per_tok = top_k;
  c.dspark = std::move(d);
  c.num_nextn_predict_layers = kStages;
  c.compress_ratios.insert(c.compress_ratios.end(), kStages, 0);
}

// V4.1-Flash's roles scaled down to 8 layers (model-spec §5.3): 0-1 SWA; 2 the ratio-2 KV and
// index source, 3 its reader; 4 the ratio-1 KV and index source and candidate source, 5 its
// reader; 6 an index source scoring 4's keys inside the candidate pool, 7 its reader. Small
// candidate blocks and top-k make a 40-token prompt exercise the pool and the selections.
// Engram before layer 1 (SWA) and layer 2 (a ratio-2 KV source), as the release's 1 and 14: 2
// heads of 32 channels, primes from 1000 (≈ 6k rows a table).
ModelConfig v41_tiny() {
  ModelConfig c = v41_common();
  c.hidden_size = 64;
  c.num_hidden_layers = 8;
  c.compress_ratios = {0, 0, 2, 2, 1, 1, 1, 1};
  c.kv_source_layer_ids = {2, 4};
  c.index_source_layer_ids = {2, 4, 6};
  c.candidate_source_layer_id = 4;
  c.candidate_topk_blocks = 3;
  c.candidate_block_size = 4;
  c.sliding_window = 16;
  c.num_attention_heads = 4;
  c.head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 64;
  c.o_groups = 2;
  c.o_lora_rank = 32;
  c.index_n_heads = 4;
  c.index_head_dim = 128;
  c.index_topk = 6;
  c.n_routed_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 64;
  v41_engram(c, {1, 2}, 2, 32, 1000);
  v41_dspark(c, 16, 4, 2);
  return c;
}

// Dims of 256-384 so FP8 matrices span many 32×32 tiles; 10 layers: 0-1 SWA, 2 the ratio-2
// source, 3-4 its readers, 5 the ratio-1 and candidate source, 6 its reader, 7 a pool index
// source, 8-9 its reusers. Engram on 1 and 2 with 4 heads of 64 (≈ 240k rows a table).
ModelConfig v41_small() {
  ModelConfig c = v41_common();
  c.hidden_size = 384;
  c.num_hidden_layers = 10;
  c.compress_ratios = {0, 0, 2, 2, 2, 1, 1, 1, 1, 1};
  c.kv_source_layer_ids = {2, 5};
  c.index_source_layer_ids = {2, 5, 7};
  c.candidate_source_layer_id = 5;
  c.candidate_topk_blocks = 4;
  c.candidate_block_size = 8;
  c.sliding_window = 32;
  c.num_attention_heads = 8;
  c.head_dim = 256;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 192;
  c.o_groups = 4;
  c.o_lora_rank = 128;
  c.index_n_heads = 8;
  c.index_head_dim = 128;
  c.index_topk = 16;
  c.n_routed_experts = 16;
  c.num_experts_per_tok = 4;
  c.moe_intermediate_size = 256;
  v41_engram(c, {1, 2}, 4, 64, 20000);
  v41_dspark(c, 64, 8, 2);
  return c;
}

// The released per-head widths (head_dim 512, RoPE 64, window 128, index 32 × 128 top-512,
// candidate pool 2048 blocks of 8, Engram 8 heads × 256) with fewer layers, heads and experts, for
// performance work: 12 layers (0-1 SWA, 2 the ratio-2 source, 3-5 readers, 6 the ratio-1 and
// candidate source, 7 its reader, 8 and 10 pool index sources, 9 and 11 their reusers), Engram on
// 1 and 2 with primes from 50000 (≈ 1.2M rows, 0.3 GB a table).
ModelConfig v41_bench() {
  ModelConfig c = v41_common();
  c.hidden_size = 2048;
  c.num_hidden_layers = 12;
  c.compress_ratios = {0, 0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1};
  c.kv_source_layer_ids = {2, 6};
  c.index_source_layer_ids = {2, 6, 8, 10};
  c.candidate_source_layer_id = 6;
  c.candidate_topk_blocks = 2048;
  c.candidate_block_size = 8;
  c.sliding_window = 128;
  c.num_attention_heads = 16;
  c.head_dim = 512;
  c.qk_rope_head_dim = 64;
  c.q_lora_rank = 512;
  c.o_groups = 4;
  c.o_lora_rank = 512;
  c.index_n_heads = 32;
  c.index_head_dim = 128;
  c.index_topk = 512;
  c.n_routed_experts = 64;
  c.num_experts_per_tok = 6;
  c.moe_intermediate_size = 1024;
  v41_engram(c, {1, 2}, 8, 256, 50000);
  v41_dspark(c, 256, 32, 3);
  return c;
}

}  // namespace

Result<ModelConfig> deepseek_v41_preset(std::string_view preset, bool fp8) {
  ModelConfig c;
  if (preset == "tiny") {
    c = v41_tiny();
  } else if (preset == "small") {
    c = v41_small();
  } else if (preset == "bench") {
    c = v41_bench();
  } else {
    return Status(ErrorCode::invalid_argument,
                  "unknown preset '" + std::string(preset) + "' (expected tiny, small or bench)");
  }
  if (fp8) {  // as released: 32×32 E8M0 tiles, FP4 experts, expert_dtype inside the quantization config
    c.quantization.quant_method = "fp8";
    c.quantization.fmt = "e4m3";
    c.quantization.activation_scheme = "dynamic";
    c.quantization.scale_fmt = "ue8m0";
    c.quantization.block_rows = 32;
    c.quantization.block_cols = 32;
    c.expert_dtype = "fp4";
  }
  return c;
}

Result<ModelConfig> arch_preset(std::string_view arch, std::string_view preset, bool fp8) {
  if (arch == "deepseek_v3") return deepseek_v3_preset(preset, fp8);
  if (arch == "deepseek_v4") return deepseek_v4_preset(preset, fp8);
  if (arch == "deepseek_v41") return deepseek_v41_preset(preset, fp8);
  return Status(ErrorCode::invalid_argument, "unsupported --arch '" + std::string(arch) +
                                                 "' (supported: deepseek_v3, deepseek_v4, deepseek_v41)");
}

}  // namespace ds::modelgen
