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
      s.index_keys = CacheQuant::fp4_32_pow2;
    }
    specs.push_back(s);
  }
  return specs;
}

}  // namespace ds
