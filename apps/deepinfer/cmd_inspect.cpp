// deepinfer inspect DIR: the parsed config (key: value lines; V4 adds a per-layer table, V4.1 the
// layer roles and the KV bytes per token), the tensor table, bytes by dtype and totals.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <string>

#include "command_support.h"
#include "commands.h"
#include "weights/checkpoint.h"
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds::cli {

namespace {

void print_config(const ModelConfig& c) {
  auto kv = [](const char* key, const auto& value) { fmt::print("{}: {}\n", key, value); };
  kv("model_type", c.model_type);
  kv("vocab_size", c.vocab_size);
  kv("hidden_size", c.hidden_size);
  kv("intermediate_size", c.intermediate_size);
  kv("moe_intermediate_size", c.moe_intermediate_size);
  kv("num_hidden_layers", c.num_hidden_layers);
  kv("num_nextn_predict_layers", c.num_nextn_predict_layers);
  kv("num_attention_heads", c.num_attention_heads);
  kv("num_key_value_heads", c.num_key_value_heads);
  kv("q_lora_rank", c.q_lora_rank);
  kv("kv_lora_rank", c.kv_lora_rank);
  kv("qk_nope_head_dim", c.qk_nope_head_dim);
  kv("qk_rope_head_dim", c.qk_rope_head_dim);
  kv("v_head_dim", c.v_head_dim);
  kv("n_routed_experts", c.n_routed_experts);
  kv("n_shared_experts", c.n_shared_experts);
  kv("num_experts_per_tok", c.num_experts_per_tok);
  kv("n_group", c.n_group);
  kv("topk_group", c.topk_group);
  kv("first_k_dense_replace", c.first_k_dense_replace);
  kv("moe_layer_freq", c.moe_layer_freq);
  kv("norm_topk_prob", c.norm_topk_prob);
  kv("routed_scaling_factor", c.routed_scaling_factor);
  kv("scoring_func", c.scoring_func);
  kv("topk_method", c.topk_method);
  kv("hidden_act", c.hidden_act);
  kv("max_position_embeddings", c.max_position_embeddings);
  kv("rms_norm_eps", c.rms_norm_eps);
  kv("rope_theta", c.rope_theta);
  kv("rope_scaling.type", c.rope_scaling.type.empty() ? std::string("none") : c.rope_scaling.type);
  if (!c.rope_scaling.type.empty()) {
    kv("rope_scaling.factor", c.rope_scaling.factor);
    kv("rope_scaling.original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings);
    kv("rope_scaling.beta_fast", c.rope_scaling.beta_fast);
    kv("rope_scaling.beta_slow", c.rope_scaling.beta_slow);
    kv("rope_scaling.mscale", c.rope_scaling.mscale);
    kv("rope_scaling.mscale_all_dim", c.rope_scaling.mscale_all_dim);
  }
  kv("tie_word_embeddings", c.tie_word_embeddings);
  kv("bos_token_id", c.bos_token_id);
  kv("eos_token_id", c.eos_token_id);
  kv("quantization.quant_method",
     c.quantization.quant_method.empty() ? std::string("none") : c.quantization.quant_method);
  if (!c.quantization.quant_method.empty()) {
    kv("quantization.fmt", c.quantization.fmt);
    kv("quantization.weight_block_size",
       fmt::format("[{}, {}]", c.quantization.block_rows, c.quantization.block_cols));
    if (!c.quantization.scale_fmt.empty()) kv("quantization.scale_fmt", c.quantization.scale_fmt);
  }
  if (c.index_n_heads > 0) {
    kv("index_n_heads", c.index_n_heads);
    kv("index_head_dim", c.index_head_dim);
    kv("index_topk", c.index_topk);
  }
}

const char* attention_kind_name(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::sliding_window:
      return "SWA";
    case AttentionKind::csa:
      return "CSA";
    case AttentionKind::hca:
      return "HCA";
  }
  return "?";
}

// deepseek_v4: the keys of its config.json, then one line per layer (main and draft).
// V4.1: every layer's role (model-spec §5.3) and the cache bytes per token (§5.11).
void print_roles_v41(const ModelConfig& c) {
  auto kv = [](const char* key, const auto& value) { fmt::print("{}: {}\n", key, value); };
  kv("kv_source_layer_ids", fmt::format("[{}]", fmt::join(c.kv_source_layer_ids, ", ")));
  kv("index_source_layer_ids", fmt::format("[{}]", fmt::join(c.index_source_layer_ids, ", ")));
  kv("candidate_source_layer_id", c.candidate_source_layer_id);
  kv("candidate_topk_blocks", c.candidate_topk_blocks);
  kv("candidate_block_size", c.candidate_block_size);
  kv("gate_temp", c.gate_temp);
  kv("engram_layer_ids", c.engram ? fmt::format("[{}]", fmt::join(c.engram->layer_ids, ", ")) : "none");
  if (c.engram) {  // model-spec §5.7: tables read by gather, never whole
    const EngramConfig& e = *c.engram;
    const int64_t row_bytes = e.head_dim + e.head_dim / 32;  // F8_E4M3 + one E8M0 scale per 32 columns
    for (size_t i = 0; i < e.layer_ids.size(); ++i) {
      fmt::print("engram table layers.{}: {} rows, {:.2f} GB (FP8 + row scales)\n", e.layer_ids[i],
                 e.num_embeddings[i], static_cast<double>(e.num_embeddings[i]) * row_bytes / 1e9);
    }
    const int64_t rows_per_token = int64_t{e.max_ngram_size - 1} * e.n_heads;
    fmt::print("engram rows gathered per token and layer: {} ({} bytes)\n", rows_per_token,
               rows_per_token * row_bytes);
    kv("engram_compressed_vocab_size", e.compressed_vocab_size);
  }
  kv("pad_token_id", c.pad_token_id);
  kv("image_token_id", c.image_token_id);
  kv("vision_config", c.has_vision ? "present (weights skipped)" : "none");
  Result<std::vector<LayerSpec>> specs = v41_layer_specs(c);
  if (!specs.ok()) return;  // the parser ran the same check
  fmt::print("\nlayers:\n{:<10}  {:>5}  {:<28}  {:<9}  {:<10}  {}\n", "layer", "ratio", "role", "kv from",
             "top-k from", "extras");
  for (const LayerSpec& s : *specs) {
    const std::string name = s.layer < c.num_hidden_layers
                                 ? fmt::format("layers.{}", s.layer)
                                 : fmt::format("mtp.{}", s.layer - c.num_hidden_layers);
    std::string role = "window only";
    if (s.compress_ratio > 0) {
      role = s.owns_compressor() ? "KV source" : "reader";
      if (s.owns_indexer()) role += s.owns_compressor() ? " + index source" : " (index source)";
    }
    std::string extras;
    if (s.candidate_source) extras += "candidate source ";
    if (s.candidate_pool) extras += "top-k inside the pool ";
    if (s.engram) extras += "Engram";
    auto layer_or_dash = [](int l) { return l < 0 ? std::string("-") : std::to_string(l); };
    fmt::print("{:<10}  {:>5}  {:<28}  {:<9}  {:<10}  {}\n", name, s.compress_ratio, role,
               layer_or_dash(s.kv_source_layer), layer_or_dash(s.index_source_layer), extras);
  }
  // Stored formats: compressed KV FP4 (16-blocks, E4M3 scales), index keys FP4 (32-blocks, E8M0),
  // window rings FP8 (32-blocks, E8M0), as model-spec §3 and §5.11 count them.
  fmt::print("\nkv_bytes_per_token: {:g} (compressed KV + index keys of the sources, stored formats)\n",
             paged_cache_bytes_per_token(c, *specs));
  fmt::print("window_ring_bytes_per_sequence: {} ({} layers x {} slots)\n",
             window_ring_bytes_per_sequence(c, *specs), specs->size(), c.sliding_window);
}

void print_config_v4(const ModelConfig& c) {
  auto kv = [](const char* key, const auto& value) { fmt::print("{}: {}\n", key, value); };
  kv("model_type", c.model_type);
  kv("vocab_size", c.vocab_size);
  kv("hidden_size", c.hidden_size);
  kv("num_hidden_layers", c.num_hidden_layers);
  kv("num_nextn_predict_layers", c.num_nextn_predict_layers);
  kv("num_attention_heads", c.num_attention_heads);
  kv("num_key_value_heads", c.num_key_value_heads);
  kv("head_dim", c.head_dim);
  kv("qk_rope_head_dim", c.qk_rope_head_dim);
  kv("q_lora_rank", c.q_lora_rank);
  kv("o_groups", c.o_groups);
  kv("o_lora_rank", c.o_lora_rank);
  kv("sliding_window", c.sliding_window);
  kv("compress_ratios", fmt::format("[{}]", fmt::join(c.compress_ratios, ", ")));
  kv("compress_rope_theta", c.compress_rope_theta);
  kv("kv_block_size_multiple", c.kv_block_size_multiple());
  kv("index_n_heads", c.index_n_heads);
  kv("index_head_dim", c.index_head_dim);
  kv("index_topk", c.index_topk);
  kv("hc_mult", c.hc_mult);
  kv("hc_sinkhorn_iters", c.hc_sinkhorn_iters);
  kv("hc_eps", c.hc_eps);
  kv("n_routed_experts", c.n_routed_experts);
  kv("n_shared_experts", c.n_shared_experts);
  kv("num_experts_per_tok", c.num_experts_per_tok);
  kv("moe_intermediate_size", c.moe_intermediate_size);
  kv("num_hash_layers", c.num_hash_layers);
  kv("routed_scaling_factor", c.routed_scaling_factor);
  kv("scoring_func", c.scoring_func);
  kv("topk_method", c.topk_method);
  kv("norm_topk_prob", c.norm_topk_prob);
  kv("swiglu_limit", c.swiglu_limit);
  kv("expert_dtype", c.expert_dtype.empty() ? std::string("none") : c.expert_dtype);
  kv("max_position_embeddings", c.max_position_embeddings);
  kv("rms_norm_eps", c.rms_norm_eps);
  kv("rope_theta", c.rope_theta);
  kv("rope_scaling.type", c.rope_scaling.type.empty() ? std::string("none") : c.rope_scaling.type);
  if (!c.rope_scaling.type.empty()) {
    kv("rope_scaling.factor", c.rope_scaling.factor);
    kv("rope_scaling.original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings);
    kv("rope_scaling.beta_fast", c.rope_scaling.beta_fast);
    kv("rope_scaling.beta_slow", c.rope_scaling.beta_slow);
  }
  kv("tie_word_embeddings", c.tie_word_embeddings);
  kv("bos_token_id", c.bos_token_id);
  kv("eos_token_id", c.eos_token_id);
  kv("quantization.quant_method",
     c.quantization.quant_method.empty() ? std::string("none") : c.quantization.quant_method);
  if (!c.quantization.quant_method.empty()) {
    kv("quantization.fmt", c.quantization.fmt);
    kv("quantization.weight_block_size",
       fmt::format("[{}, {}]", c.quantization.block_rows, c.quantization.block_cols));
    if (!c.quantization.scale_fmt.empty()) kv("quantization.scale_fmt", c.quantization.scale_fmt);
  }
  if (c.dspark) {
    kv("dspark_target_layer_ids", fmt::format("[{}]", fmt::join(c.dspark->target_layer_ids, ", ")));
    kv("dspark_block_size", c.dspark->block_size);
    kv("dspark_noise_token_id", c.dspark->noise_token_id);
    kv("dspark_markov_rank", c.dspark->markov_rank);
  }
  if (c.is_v41()) return print_roles_v41(c);
  fmt::print("\nlayers:\n{:<10}  {:>5}  {:<4}  {}\n", "layer", "ratio", "attn", "routing");
  for (int layer = 0; layer < c.num_hidden_layers + c.num_draft_layers(); ++layer) {
    const std::string name = layer < c.num_hidden_layers ? fmt::format("layers.{}", layer)
                                                         : fmt::format("mtp.{}", layer - c.num_hidden_layers);
    fmt::print("{:<10}  {:>5}  {:<4}  {}\n", name, c.compress_ratio(layer),
               attention_kind_name(c.attention_kind(layer)),
               c.is_hash_layer(layer) ? "hash (tid2eid)" : "scores + bias");
  }
}

std::string basename_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

int run_inspect(const std::string& dir) {
  const std::string cmd = "inspect";
  Result<ModelConfig> cfg = load_model_config(dir);
  if (!cfg.ok()) return report_error(cmd, cfg.status());
  Result<Checkpoint> ckpt = Checkpoint::open(dir);
  if (!ckpt.ok()) return report_error(cmd, ckpt.status());

  if (cfg->is_v4_family()) {
    print_config_v4(*cfg);
  } else {
    print_config(*cfg);
  }
  const auto tensors = ckpt->tensors();
  size_t name_w = 4;
  for (const TensorEntry* t : tensors) name_w = std::max(name_w, t->name.size());
  fmt::print("\ntensors:\n{:<{}}  {:<8}  {:<20}  {:>12}  {}\n", "name", name_w, "dtype", "shape", "bytes",
             "file");
  int64_t n_params = 0;
  for (const TensorEntry* t : tensors) {
    fmt::print("{:<{}}  {:<8}  {:<20}  {:>12}  {}\n", t->name, name_w, dtype_name(t->dtype),
               t->shape.to_string(), t->nbytes, t->file ? basename_of(*t->file) : std::string("?"));
    n_params += t->shape.numel();
  }
  // Bytes by stored dtype (packed FP4 experts show as I8, their scales as F8_E8M0).
  std::map<std::string, std::pair<size_t, size_t>> by_dtype;  // dtype -> (tensors, bytes)
  for (const TensorEntry* t : tensors) {
    auto& [count, bytes] = by_dtype[std::string(dtype_name(t->dtype))];
    ++count;
    bytes += t->nbytes;
  }
  fmt::print("\nbytes by dtype:\n");
  for (const auto& [dtype, cb] : by_dtype) {
    fmt::print("{:<8}  {:>6} tensors  {:>14} bytes  {:6.2f}%\n", dtype, cb.first, cb.second,
               100.0 * static_cast<double>(cb.second) /
                   static_cast<double>(std::max<size_t>(1, ckpt->total_bytes())));
  }
  fmt::print("\ntotal_tensors: {}\ntotal_bytes: {} ({:.3f} GiB)\ntotal_elements: {}\n", tensors.size(),
             ckpt->total_bytes(), static_cast<double>(ckpt->total_bytes()) / (1024.0 * 1024.0 * 1024.0),
             n_params);
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_inspect_command(CLI::App& app, CommandContext& ctx) {
  auto dir = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("inspect", "Print a checkpoint's config and tensor table");
  sub->add_option("dir", *dir, "Checkpoint directory")->required();
  sub->callback([dir, &ctx] {
    try {
      ctx.exit_code = run_inspect(*dir);
    } catch (const std::exception& e) {
      ctx.exit_code = report_error("inspect", Status(ErrorCode::internal, e.what()));
    }
  });
}

}  // namespace ds::cli
