// DeepSeek-V4.1 layer roles (model-spec §5.3): CSA2 KV sharing and index reuse, the candidate
// source and Engram, checked against compress_ratios so the model never has to.
#include <algorithm>
#include <string>

#include "weights/layer_spec.h"

namespace ds {

namespace {

class V41SpecBuilder {
 public:
  V41SpecBuilder(const ModelConfig& c, std::string source) : c_(c), source_(std::move(source)) {}

  Status error(const std::string& key, const std::string& what) const {
    return Status(ErrorCode::weights_bad_config, source_ + ": text_config." + key + ": " + what);
  }

  // A source list: strictly increasing main layers, each with a compressed cache to own.
  Status check_list(const std::string& key, const std::vector<int>& ids) const {
    for (size_t i = 0; i < ids.size(); ++i) {
      const int l = ids[i];
      const std::string at = "element " + std::to_string(i) + " (layer " + std::to_string(l) + ")";
      if (l < 0 || l >= c_.num_hidden_layers) {
        return error(key, at + " is not a main layer [0, " + std::to_string(c_.num_hidden_layers) + ")");
      }
      if (i > 0 && l <= ids[i - 1]) return error(key, at + " is not above the previous element");
      if (c_.compress_ratio(l) == 0) {
        return error(key, at + " has compress_ratios[" + std::to_string(l) + "] = 0: nothing to own");
      }
    }
    return ok_status();
  }

  // The last element of `ids` that is <= layer, or -1.
  static int latest(const std::vector<int>& ids, int layer) {
    int found = -1;
    for (int s : ids)
      if (s <= layer) found = s;
    return found;
  }

  Result<std::vector<LayerSpec>> build() const {
    const int n_main = c_.num_hidden_layers;
    const int n_slots = n_main + c_.num_draft_layers();
    if (n_slots < n_main || static_cast<int>(c_.compress_ratios.size()) != n_slots) {
      return error("compress_ratios", "has " + std::to_string(c_.compress_ratios.size()) + " entries for " +
                                          std::to_string(n_slots) + " layers");
    }
    DS_TRY(check_list("kv_source_layer_ids", c_.kv_source_layer_ids));
    DS_TRY(check_list("index_source_layer_ids", c_.index_source_layer_ids));
    std::vector<LayerSpec> specs;
    for (int l = 0; l < n_slots; ++l) {
      LayerSpec s;
      s.layer = l;
      s.compress_ratio = c_.compress_ratio(l);
      s.window_kv = CacheQuant::fp8_32_pow2;
      if (s.compress_ratio < 0)
        return error("compress_ratios", "element " + std::to_string(l) + " is negative");
      if (s.compress_ratio > 0 && l >= n_main) {
        return error("compress_ratios", "element " + std::to_string(l) + " is " +
                                            std::to_string(s.compress_ratio) +
                                            ": draft (DSpark) layers are window-only in V4.1");
      }
      if (s.compress_ratio > 0) DS_TRY(fill_compressed(s));
      specs.push_back(s);
    }
    DS_TRY(fill_candidate(specs));
    if (c_.engram) {
      for (int l : c_.engram->layer_ids) {
        if (l < 0 || l >= n_main)
          return error("engram_layer_ids", std::to_string(l) + " is not a main layer");
        specs[static_cast<size_t>(l)].engram = true;
      }
    }
    return specs;
  }

 private:
  Status fill_compressed(LayerSpec& s) const {
    const int l = s.layer;
    const std::string at = "layer " + std::to_string(l) + " (compress_ratios[" + std::to_string(l) +
                           "] = " + std::to_string(s.compress_ratio) + ")";
    const int kv = latest(c_.kv_source_layer_ids, l);
    if (kv < 0) return error("kv_source_layer_ids", at + " has no source at or before it");
    if (c_.compress_ratio(kv) != s.compress_ratio) {
      return error("kv_source_layer_ids", at + " reads source " + std::to_string(kv) + " of ratio " +
                                              std::to_string(c_.compress_ratio(kv)));
    }
    const int ix = latest(c_.index_source_layer_ids, l);
    if (ix < 0) return error("index_source_layer_ids", at + " has no index source at or before it");
    // The reused top-k are entry ids of the index source's KV cache: it must be this layer's too.
    const int ix_kv = latest(c_.kv_source_layer_ids, ix);
    if (ix_kv != kv) {
      return error("index_source_layer_ids", at + " reuses the top-k of index source " + std::to_string(ix) +
                                                 ", which reads KV source " + std::to_string(ix_kv) +
                                                 ", not " + std::to_string(kv));
    }
    s.attention = AttentionKind::csa;
    s.overlap = false;
    s.kv_source_layer = kv;
    s.index_source_layer = ix;
    s.index_keys_layer = kv;  // KV sources derive the index keys from their compressed latent
    s.compressed_kv = CacheQuant::fp4_16_e4m3;
    s.index_keys = CacheQuant::fp4_32_pow2;  // 32-blocks with E8M0 (power-of-two) scales
    return ok_status();
  }

  Status fill_candidate(std::vector<LayerSpec>& specs) const {
    const int cand = c_.candidate_source_layer_id;
    if (cand < 0) return ok_status();
    const std::string key = "candidate_source_layer_id";
    if (cand >= c_.num_hidden_layers) return error(key, std::to_string(cand) + " is not a main layer");
    const LayerSpec& cs = specs[static_cast<size_t>(cand)];
    if (!cs.owns_compressor() || !cs.owns_indexer()) {
      return error(key, "layer " + std::to_string(cand) +
                            " must be in both kv_source_layer_ids and index_source_layer_ids");
    }
    specs[static_cast<size_t>(cand)].candidate_source = true;
    // Later index sources that score the candidate source's keys pick inside its pool (§5.6).
    for (LayerSpec& s : specs) {
      if (s.layer > cand && s.owns_indexer() && s.index_keys_layer == cand) s.candidate_pool = true;
    }
    return ok_status();
  }

  const ModelConfig& c_;
  std::string source_;
};

}  // namespace

Result<std::vector<LayerSpec>> v41_layer_specs(const ModelConfig& cfg, const std::string& source) {
  return V41SpecBuilder(cfg, source).build();
}

}  // namespace ds
