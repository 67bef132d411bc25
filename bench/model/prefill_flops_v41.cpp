#include "prefill_flops_v41.h"

#include <algorithm>
#include <string_view>

#include "tensor_name.h"

namespace ds::bench {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Multiply-adds per row of a 2-D matmul weight (packed FP4 I8 [out, in/2] holds two per byte);
// scales, the Engram table (a gather) and 1-D vectors are not matmuls.
double params(const TensorInfo& t) {
  if (t.shape.rank != 2 || t.name.ends_with(".scale") || t.name.find("engram.embed") != std::string::npos)
    return 0;
  const double n = static_cast<double>(t.shape[0]) * static_cast<double>(t.shape[1]);
  return t.dtype == DType::i8 ? 2.0 * n : n;
}

}  // namespace

V41PrefillFlops v41_prefill_flops(const std::vector<TensorInfo>& tensors, const ModelConfig& cfg,
                                  const std::vector<LayerSpec>& specs, int split, int64_t prompt_len,
                                  int64_t decoder_rows) {
  const int n_layers = cfg.num_hidden_layers;
  const double routed =
      cfg.n_routed_experts > 0 ? static_cast<double>(cfg.num_experts_per_tok) / cfg.n_routed_experts : 0.0;
  std::vector<double> body(static_cast<size_t>(n_layers), 0.0), source(body.size(), 0.0);
  V41PrefillFlops f;
  for (const TensorInfo& t : tensors) {
    if (starts_with(t.name, "head.")) {
      f.head += 2.0 * params(t);
      continue;
    }
    std::string_view rest;
    const int l = layer_index(t.name, rest);
    if (l < 0 || l >= n_layers) continue;  // embedding (a gather), final norm, DSpark stages
    const double p = params(t) * (starts_with(rest, "ffn.experts.") ? routed : 1.0);
    if (starts_with(rest, "attn.compressor.") || rest == "attn.indexer.wk.weight") {
      source[l] += p;
    } else {
      body[l] += p;
    }
  }
  const double P = static_cast<double>(prompt_len);
  const int64_t cut = std::max<int64_t>(0, prompt_len - decoder_rows);
  const double per_key = 4.0 * cfg.num_attention_heads * cfg.head_dim;
  const double per_index_key = 2.0 * cfg.index_n_heads * cfg.index_head_dim;
  for (int l = 0; l < n_layers; ++l) {
    const bool decoder = split >= 0 && l >= split;
    const int64_t start = decoder ? cut : 0;
    const double rows = static_cast<double>(prompt_len - start);
    double layer = 2.0 * body[l] * rows;
    const double src = 2.0 * source[l] * (l == split ? P : rows);
    const int ratio = specs[l].compress_ratio;
    for (int64_t p = start; p < prompt_len; ++p) {
      double keys = static_cast<double>(std::min<int64_t>(cfg.sliding_window, p - start + 1));
      if (ratio > 0) {
        const int64_t n_c = (p + 1) / ratio;
        keys += static_cast<double>(std::min<int64_t>(cfg.index_topk, n_c));
        if (specs[l].owns_indexer()) layer += per_index_key * static_cast<double>(n_c);
      }
      layer += per_key * keys;
    }
    if (l == split) {
      f.source += src;
    } else {
      layer += src;  // an encoder KV source's compressor runs on its layer's rows
    }
    (decoder ? f.decoder : f.encoder) += layer;
  }
  return f;
}

}  // namespace ds::bench
