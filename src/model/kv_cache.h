// Per-sequence MLA latent cache (contiguous, grows; the paged pool of the engine replaces it later).
// For each layer and each cached position: [kv_lora_rank normalised c_kv | qk_rope_head_dim RoPE'd
// k_pe] in f32 — everything attention needs, shared by all heads. The MTP layer has its own cache
// with its own position count (it runs one position behind the main model).
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace ds {

// One layer's rows [n_rows, row_dim] f32.
class LatentCache {
 public:
  explicit LatentCache(int64_t row_dim = 0) : row_dim_(row_dim) {}

  int64_t row_dim() const { return row_dim_; }
  int64_t n_rows() const { return n_rows_; }
  const float* data() const { return rows_.data(); }
  const float* row(int64_t i) const { return rows_.data() + i * row_dim_; }

  // Appends n rows and returns them for the caller to fill; amortised growth (doubling), so a
  // decode step allocates only when the capacity is crossed.
  float* append_rows(int64_t n);
  // Drops rows at and after n_rows (speculative rollback). Precondition: n_rows <= this->n_rows().
  void truncate(int64_t n_rows);

 private:
  int64_t row_dim_ = 0;
  int64_t n_rows_ = 0;
  std::vector<float> rows_;
};

// Everything the model keeps for one sequence between forwards.
class SequenceState {
 public:
  // n_layers main layers + (has_mtp ? 1 : 0) MTP cache, each row_dim wide.
  SequenceState(int n_layers, int64_t row_dim, bool has_mtp, int64_t max_seq_len);

  // Tokens consumed by the main model = the next token's position.
  int64_t n_tokens() const { return n_tokens_; }
  // (hidden, next token) pairs consumed by the MTP layer = its next position.
  int64_t n_mtp_tokens() const { return n_mtp_tokens_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  int n_layers() const { return static_cast<int>(layers_.size()); }
  int64_t row_dim() const { return row_dim_; }
  bool has_mtp() const { return has_mtp_; }

  LatentCache& layer(int i) { return layers_[static_cast<size_t>(i)]; }
  const LatentCache& layer(int i) const { return layers_[static_cast<size_t>(i)]; }
  LatentCache& mtp_layer() { return mtp_; }

  // model_bad_input naming the limit when n_new more tokens would exceed max_seq_len.
  Status check_room(int64_t n_new, int64_t n_have) const;
  // Called by the model once every layer has appended the chunk's rows.
  void advance(int64_t n) { n_tokens_ += n; }
  void advance_mtp(int64_t n) { n_mtp_tokens_ += n; }
  // Forget everything from position n_tokens on (main and MTP caches).
  void truncate(int64_t n_tokens);

 private:
  std::vector<LatentCache> layers_;
  LatentCache mtp_;
  int64_t row_dim_ = 0;
  bool has_mtp_ = false;
  int64_t max_seq_len_ = 0;
  int64_t n_tokens_ = 0;
  int64_t n_mtp_tokens_ = 0;
};

}  // namespace ds
