#include "active_weights_v4.h"

#include <algorithm>
#include <string_view>

#include "tensor_name.h"

namespace ds::bench {
namespace {

constexpr double kFp4BitsPerWeight = 4.25;  // E2M1 + one E8M0 byte per 32 weights

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool is_scale(std::string_view name) { return name.ends_with(".scale"); }

// Weights of a 2-D matmul weight; a packed FP4 tensor (I8 [out, in/2]) holds two per byte. The
// mHC `hc_*_fn` mixing matrices are F32 matmuls too; `compressor.ape` is added, not multiplied.
double matmul_params(const TensorInfo& t) {
  if (t.shape.rank != 2 || is_scale(t.name) || t.name.ends_with(".ape") || t.name.ends_with("tid2eid"))
    return 0;
  const double n = static_cast<double>(t.shape[0]) * static_cast<double>(t.shape[1]);
  return t.dtype == DType::i8 ? 2.0 * n : n;
}

// Decode bytes of one routed-expert tensor: packed FP4 weights at 4.25 bits (their scale tensor
// is inside that figure and skipped), anything else as stored.
double routed_bytes(const TensorInfo& t, bool fp4_experts) {
  if (!fp4_experts) return static_cast<double>(t.nbytes);
  if (is_scale(t.name)) return 0;
  if (t.dtype == DType::i8) return matmul_params(t) * kFp4BitsPerWeight / 8.0;
  return static_cast<double>(t.nbytes);
}

}  // namespace

ActiveWeights count_active_weights_v4(const std::vector<TensorInfo>& tensors, const ModelConfig& cfg) {
  ActiveWeights a;
  const double routed_fraction =
      cfg.n_routed_experts > 0 ? static_cast<double>(cfg.num_experts_per_tok) / cfg.n_routed_experts : 0.0;
  const bool fp4_experts = cfg.expert_dtype == "fp4";
  for (const TensorInfo& t : tensors) {
    const std::string_view name = t.name;
    const double bytes = static_cast<double>(t.nbytes);
    if (starts_with(name, "mtp.")) {
      ++a.n_mtp_tensors_excluded;
      continue;
    }
    if (starts_with(name, "head.")) {
      a.head_bytes += bytes;
      a.head_params += matmul_params(t);
      continue;
    }
    if (name == "embed.weight") {  // a lookup reads one row
      const double rows = t.shape.rank >= 1 && t.shape[0] > 0 ? static_cast<double>(t.shape[0]) : 1.0;
      a.other_bytes += bytes / rows;
      continue;
    }
    if (name == "norm.weight" || starts_with(name, "hc_head_")) {
      a.other_bytes += bytes;
      a.body_params += matmul_params(t);
      continue;
    }
    std::string_view rest;
    const int layer = layer_index(name, rest);
    if (layer < 0) {
      ++a.n_unclassified;
      a.other_bytes += bytes;
      continue;
    }
    if (layer >= cfg.num_hidden_layers) {
      ++a.n_mtp_tensors_excluded;
      continue;
    }
    if (starts_with(rest, "engram.embed.")) {  // V4.1 Engram table (+ row scales): a token gathers rows
      const double rows = t.shape.rank >= 1 && t.shape[0] > 0 ? static_cast<double>(t.shape[0]) : 1.0;
      const double gathered =
          cfg.engram ? static_cast<double>(cfg.engram->max_ngram_size - 1) * cfg.engram->n_heads : 1.0;
      a.other_bytes += bytes * std::min(1.0, gathered / rows);
    } else if (starts_with(rest, "engram.")) {  // wkv, q/k weights: read whole every step
      a.dense_bytes += bytes;
      a.body_params += matmul_params(t);
    } else if (starts_with(rest, "attn.")) {
      a.attention_bytes += bytes;
      a.body_params += matmul_params(t);
    } else if (starts_with(rest, "ffn.experts.")) {
      a.routed_bytes += routed_bytes(t, fp4_experts) * routed_fraction;
      a.body_params += matmul_params(t) * routed_fraction;
    } else if (rest == "ffn.gate.tid2eid") {  // hash routing reads one row per token
      const double rows = t.shape.rank >= 1 && t.shape[0] > 0 ? static_cast<double>(t.shape[0]) : 1.0;
      a.dense_bytes += bytes / rows;
    } else if (starts_with(rest, "ffn.")) {  // shared expert, router gate + bias
      a.dense_bytes += bytes;
      a.body_params += matmul_params(t);
    } else if (starts_with(rest, "hc_") || rest.ends_with("norm.weight")) {
      a.other_bytes += bytes;
      a.body_params += matmul_params(t);
    } else {
      ++a.n_unclassified;
      a.other_bytes += bytes;
    }
  }
  return a;
}

double v4_attention_flops_per_token(const ModelConfig& cfg, int64_t prompt_len) {
  if (prompt_len <= 0) return 0;
  double total = 0;
  for (int layer = 0; layer < cfg.num_hidden_layers; ++layer) {
    const int64_t ratio = cfg.compress_ratio(layer);
    for (int64_t p = 0; p < prompt_len; ++p) {
      const int64_t n_comp = ratio > 0 ? (p + 1) / ratio : 0;
      int64_t keys = std::min<int64_t>(cfg.sliding_window, p + 1);
      if (ratio == kCsaCompressRatio) {
        keys += std::min<int64_t>(cfg.index_topk, n_comp);
        total += 2.0 * cfg.index_n_heads * cfg.index_head_dim * static_cast<double>(n_comp);
      } else if (ratio > 0) {
        keys += n_comp;
      }
      total += 4.0 * cfg.num_attention_heads * cfg.head_dim * static_cast<double>(keys);
    }
  }
  return total / static_cast<double>(prompt_len);
}

double v4_cache_bytes(const ModelConfig& cfg, int64_t n_ctx) {
  double rows = 0;
  for (int layer = 0; layer < cfg.num_hidden_layers; ++layer) {
    const int64_t ratio = cfg.compress_ratio(layer);
    const int64_t n_comp = ratio > 0 ? n_ctx / ratio : 0;
    rows += static_cast<double>(std::min<int64_t>(cfg.sliding_window, n_ctx)) * cfg.head_dim;
    if (ratio == kCsaCompressRatio) {
      rows += static_cast<double>(std::min<int64_t>(cfg.index_topk, n_comp)) * cfg.head_dim;
      rows += static_cast<double>(n_comp) * cfg.index_head_dim;
    } else if (ratio > 0) {
      rows += static_cast<double>(n_comp) * cfg.head_dim;
    }
  }
  return rows * 4.0;
}

}  // namespace ds::bench
