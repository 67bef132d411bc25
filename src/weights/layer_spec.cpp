#include "weights/layer_spec.h"

#include <string>

namespace ds {

std::string_view cache_quant_name(CacheQuant q) {
  switch (q) {
    case CacheQuant::none:
      return "none";
    case CacheQuant::fp8_64_pow2_nope:
      return "fp8_64_pow2_nope";
    case CacheQuant::fp4_32_pow2:
      return "fp4_32_pow2";
    case CacheQuant::fp8_32_pow2:
      return "fp8_32_pow2";
    case CacheQuant::fp4_16_e4m3:
      return "fp4_16_e4m3";
  }
  return "?";
}

Result<std::vector<LayerSpec>> v4_layer_specs(const ModelConfig& cfg) {
  const int n_slots = cfg.num_hidden_layers + cfg.num_draft_layers();
  if (n_slots < 0 || static_cast<int>(cfg.compress_ratios.size()) != n_slots) {
    return Status(ErrorCode::weights_bad_config, "config.json: compress_ratios has " +
                                                     std::to_string(cfg.compress_ratios.size()) +
                                                     " entries for " + std::to_string(n_slots) + " layers");
  }
  std::vector<LayerSpec> specs;
  for (int l = 0; l < n_slots; ++l) {
    LayerSpec s;
    s.layer = l;
    s.compress_ratio = cfg.compress_ratio(l);
    if (s.compress_ratio < 0) {
      return Status(ErrorCode::weights_bad_config,
                    "config.json: compress_ratios[" + std::to_string(l) + "] is negative");
    }
    // V4: every layer owns what it reads; CSA (and only CSA) overlaps its groups and has an indexer.
    s.attention = cfg.attention_kind(l);
    s.overlap = s.attention == AttentionKind::csa;
    s.window_kv = CacheQuant::fp8_64_pow2_nope;
    if (s.compress_ratio > 0) {
      s.kv_source_layer = l;
      s.compressed_kv = CacheQuant::fp8_64_pow2_nope;
    }
    if (s.attention == AttentionKind::csa) {
      s.index_source_layer = l;
      s.index_keys_layer = l;
      s.index_compressor = true;
      s.index_keys = CacheQuant::fp4_32_pow2;
    }
    specs.push_back(s);
  }
  return specs;
}

int64_t cache_row_bytes(CacheQuant q, int64_t width, int64_t rope_dim) {
  switch (q) {
    case CacheQuant::none:
      return 2 * width;
    case CacheQuant::fp8_64_pow2_nope:
      return (width - rope_dim) + (width - rope_dim + 63) / 64 + 2 * rope_dim;
    case CacheQuant::fp4_32_pow2:
      return (width + 1) / 2 + (width + 31) / 32;
    case CacheQuant::fp8_32_pow2:
      return width + (width + 31) / 32;
    case CacheQuant::fp4_16_e4m3:
      return (width + 1) / 2 + (width + 15) / 16;
  }
  return 0;
}

double paged_cache_bytes_per_token(const ModelConfig& cfg, const std::vector<LayerSpec>& specs) {
  double bytes = 0;
  for (const LayerSpec& s : specs) {
    if (s.compress_ratio == 0) continue;
    if (s.owns_compressor())
      bytes += static_cast<double>(cache_row_bytes(s.compressed_kv, cfg.head_dim, cfg.qk_rope_head_dim)) /
               s.compress_ratio;
    if (s.owns_index_keys())
      bytes += static_cast<double>(cache_row_bytes(s.index_keys, cfg.index_head_dim, cfg.qk_rope_head_dim)) /
               s.compress_ratio;
  }
  return bytes;
}

int64_t window_ring_bytes_per_sequence(const ModelConfig& cfg, const std::vector<LayerSpec>& specs) {
  int64_t bytes = 0;
  for (const LayerSpec& s : specs)
    bytes += int64_t{cfg.sliding_window} * cache_row_bytes(s.window_kv, cfg.head_dim, cfg.qk_rope_head_dim);
  return bytes;
}

}  // namespace ds
