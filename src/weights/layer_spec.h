// The role of every layer of a compressed-attention model (V4 today, V4.1 next), made explicit
// once from config.json so the model composes blocks from it instead of re-deriving roles from
// compress ratios in every file: the attention kind, the ratio it reads, which layer's compressed
// KV and indexer it uses, how each of its caches is quantised, and whether it has Engram.
// V4 fills it from compress_ratios (kind and overlap from the ratio, as the reference does); V4.1
// fills the source layers from kv_source_layer_ids / index_source_layer_ids (layer_spec_v41.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "weights/model_config.h"

namespace ds {

// How a cache's values are stored (or their storage simulated), model-spec §3.
enum class CacheQuant : uint8_t {
  none,              // kept as computed
  fp8_64_pow2_nope,  // V4 main KV: the non-RoPE channels FP8 E4M3, 64-blocks, power-of-two scales
  fp4_32_pow2,       // V4 index keys/queries (after Hadamard): FP4 E2M1, 32-blocks, power-of-two scales
  fp8_32_pow2,       // V4.1 window KV: all channels FP8, 32-blocks, power-of-two scales
  fp4_16_e4m3,       // V4.1 compressed KV: FP4, 16-blocks, E4M3 scales
};
std::string_view cache_quant_name(CacheQuant q);

struct LayerSpec {
  int layer = 0;  // its own slot: main layers 0..n-1, then the draft (MTP) layers
  AttentionKind attention = AttentionKind::sliding_window;
  int compress_ratio = 0;         // the ratio this layer reads (0: window only)
  bool overlap = false;           // overlapping compression groups (V4 CSA: ratio 4)
  int kv_source_layer = -1;       // slot whose compressed KV it reads (-1: none; itself = owns one)
  int index_source_layer = -1;    // slot whose indexer (queries, weights, top-k) it uses (-1: none)
  int index_keys_layer = -1;      // slot that owns the index keys it scores against (-1: none)
  bool index_compressor = false;  // V4: its index keys come from the indexer's own compressor
  bool candidate_source = false;  // V4.1: builds the two-level candidate pool (model-spec §5.6)
  bool candidate_pool = false;    // V4.1: its own top-k is restricted to the candidate pool
  CacheQuant window_kv = CacheQuant::none;
  CacheQuant compressed_kv = CacheQuant::none;
  CacheQuant index_keys = CacheQuant::none;
  bool engram = false;

  bool owns_compressor() const { return kv_source_layer == layer; }
  bool owns_indexer() const { return index_source_layer == layer; }
  bool owns_index_keys() const { return index_keys_layer == layer; }

  bool operator==(const LayerSpec&) const = default;
};

// Every layer slot of a deepseek_v4 config (main, then draft), validated (weights_bad_config
// naming compress_ratios when a ratio is negative or does not match the sliding window).
Result<std::vector<LayerSpec>> v4_layer_specs(const ModelConfig& cfg);

// Every layer slot of a deepseek_v41 config (model-spec §5.3): compress_ratios[l] is the ratio
// layer l reads; only kv_source_layer_ids own a compressor (and the index keys), the others read
// the most recent source; index_source_layer_ids own an indexer, the others reuse the most recent
// one's top-k. An inconsistent list is one weights_bad_config line
// "<source>: text_config.<key>: ..." naming the key and the layer.
Result<std::vector<LayerSpec>> v41_layer_specs(const ModelConfig& cfg,
                                               const std::string& source = "config.json");

// Bytes of one cache row of `width` channels in the format `q` names (RoPE channels of
// fp8_64_pow2_nope stay bf16; `none` counts bf16): e.g. fp4_16_e4m3 at 512 = 256 + 32 = 288.
int64_t cache_row_bytes(CacheQuant q, int64_t width, int64_t rope_dim);

// The paged caches in their stored formats, per token: every compressor-owning layer's
// compressed KV row / ratio plus every index-key owner's key row / ratio (V4.1-Flash: 890).
double paged_cache_bytes_per_token(const ModelConfig& cfg, const std::vector<LayerSpec>& specs);
// The fixed per-sequence window rings (sliding_window rows of head_dim per layer slot) in the
// window format of each layer.
int64_t window_ring_bytes_per_sequence(const ModelConfig& cfg, const std::vector<LayerSpec>& specs);

}  // namespace ds
