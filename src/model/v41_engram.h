// V4.1 Engram (model-spec §5.7): before each layer of engram_layer_ids, every position's hashed
// 2-, 3- and 4-gram rows are gathered from that layer's table, projected to per-stream keys and a
// shared value, and each of the hc residual streams adds the value under its own sigmoid gate.
//
// The n-grams of a position come from its own token and the max_ngram_size − 1 tokens before it,
// each mapped to its compressed id (the checkpoint tokenizer's normalised map, built by the caller:
// tokenizer/engram_token_map.h). Dead-token rules (decisions in docs/models.md "Engram"): a slot
// before position 0, or at or behind an image token (image_token_id) going back from the current
// token, and every longer slot, uses the compressed id of engram_pad_token_id; an image token
// itself gets gate 0. The history of a sequence (its last max_ngram_size − 1 token ids) lives in
// its state slot, so chunked prefill and decode hash exactly as one prefill does.
//
// Tables are read in place from the mapped checkpoint (a real one is ~98 GB): F8_E4M3
// [rows, head_dim] with one E8M0 scale per 32 columns of each row ([rows, head_dim / 32]), or
// BF16/F32 [rows, head_dim] (bf16 make-model checkpoints); only the gathered rows are touched.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/engram_hash.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/v4_numerics.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

// The compressed-id rules shared by every Engram layer of a model.
struct EngramTokenRules {
  std::shared_ptr<const std::vector<int32_t>> compressed;  // [vocab_size] token id -> compressed id
  int32_t pad_compressed = 0;                              // compressed id of engram_pad_token_id
  int32_t dead_token = -1;                                 // image_token_id (-1: none)
  int n_slots = 0;                                         // max_ngram_size
};

// A chunk's n-gram ids from a sequence's history. ids: [n, n_slots] compressed ids (slot 0 the
// token itself, slot s the token s back, pad where the rules above say); gated: [n] 0 for a dead
// token. history: the sequence's last n_slots − 1 token ids (oldest first; shorter at the
// start), updated to include `tokens`.
void engram_ngram_ids(const EngramTokenRules& rules, std::vector<int32_t>& history,
                      std::span<const int32_t> tokens, int64_t* ids, uint8_t* gated);

// One layer's table, projection and gates.
class V41EngramLayer {
 public:
  // `prefix` = "layers.N.engram."; weights_* errors name the tensor (a table whose row count is
  // not the layer's Σ primes is weights_shape_mismatch).
  static Result<V41EngramLayer> load(const Checkpoint& ckpt, const std::string& prefix, const ModelConfig& c,
                                     const EngramHashLayer& hash);

  // streams: [n, hc, d] updated in place; ids, gated: from engram_ngram_ids for the same n rows.
  void forward(const ForwardContext& ctx, float* streams, int64_t n, const int64_t* ids,
               const uint8_t* gated);

 private:
  // e [e_dim] = the position's gathered rows, dequantised and concatenated in (n-gram, head) order.
  void gather(const int64_t* slot_ids, float* e) const;

  EngramHashLayer hash_;
  int64_t hidden_ = 0, hc_ = 0, n_heads_ = 0, head_dim_ = 0;
  double eps_ = 0;
  const TensorEntry* table_ = nullptr;      // [rows, head_dim]: F8_E4M3, BF16 or F32
  const uint8_t* table_scale_ = nullptr;    // [rows, head_dim / 32] E8M0 (F8_E4M3 tables only)
  Linear wkv_;                              // [(hc + 1)·d, e_dim]: K_0..K_{hc-1}, then v
  std::vector<float> q_weight_, k_weight_;  // [hc, d] each
  std::vector<int64_t> rows_;               // scratch [n, n_rows_per_position]
  std::vector<float> e_, kv_;               // scratch [n, e_dim], [n, (hc + 1)·d]
};

// Every Engram layer of a model plus the token rules; empty when the config has no Engram.
class V41Engram {
 public:
  // model_unsupported naming text_config.engram_layer_ids when the config has Engram but
  // `token_map` is null (the caller builds it from the checkpoint's tokenizer); invalid_argument
  // when its size is not vocab_size or an id is outside engram_compressed_vocab_size.
  static Result<V41Engram> load(const Checkpoint& ckpt, const ModelConfig& c,
                                std::shared_ptr<const std::vector<int32_t>> token_map);

  bool empty() const { return layer_of_.empty(); }
  const EngramTokenRules& rules() const { return rules_; }
  // Whether layer l has an Engram module.
  bool applies(int layer) const {
    return layer >= 0 && layer < static_cast<int>(layer_of_.size()) && layer_of_[layer] >= 0;
  }
  void forward(int layer, const ForwardContext& ctx, float* streams, int64_t n, const int64_t* ids,
               const uint8_t* gated) {
    layers_[static_cast<size_t>(layer_of_[layer])].forward(ctx, streams, n, ids, gated);
  }

 private:
  EngramTokenRules rules_;
  std::vector<int> layer_of_;  // [num_hidden_layers]: index into layers_ or -1
  std::vector<V41EngramLayer> layers_;
};

}  // namespace ds
