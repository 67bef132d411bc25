// DeepSeek-V3 (and V2-style q_proj variants): embedding, decoder layers (MLA + dense/MoE), final
// norm, lm_head, and the MTP layer, loaded from a Hugging Face checkpoint directory.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/batch_layout.h"
#include "model/decoder_layer.h"
#include "model/embedding.h"
#include "model/linear.h"
#include "model/model_options.h"
#include "model/model_runner.h"
#include "model/mtp.h"
#include "weights/checkpoint.h"
#include "weights/model_config.h"

namespace ds {

class DeepSeekV3 final : public ModelRunner {
 public:
  // Opens DIR (config.json + safetensors), validates every tensor's dtype and shape (errors name
  // the tensor) and builds the layers. Weights stay memory-mapped in their stored precision.
  static Result<std::unique_ptr<DeepSeekV3>> load(const std::string& dir, const ModelOptions& opts);
  // Same from an already opened checkpoint and parsed config (tests build configs in memory).
  static Result<std::unique_ptr<DeepSeekV3>> load(Checkpoint ckpt, const ModelConfig& cfg,
                                                  const ModelOptions& opts);

  const ModelConfig& config() const override { return cfg_; }
  const ModelOptions& options() const { return opts_; }
  const Checkpoint& checkpoint() const { return ckpt_; }
  KvCacheLayout kv_cache_layout() const override;
  Status init_kv_cache(const KvCacheConfig& cfg) override;
  const KvCacheConfig& kv_cache_config() const override { return kv_config_; }
  Status forward(std::span<const ForwardRequest> requests, LogitsOutput& out) override;
  Status forward_idle() override;
  Status forward_mtp_idle() override;
  int64_t kv_block_bytes() const override;
  std::string kv_layout_tag() const override;
  Status export_kv_block(int32_t block_id, std::span<std::byte> out) const override;
  Status import_kv_block(int32_t block_id, std::span<const std::byte> in) override;
  std::vector<KvPageArray> kv_page_arrays() override;
  bool set_kv_layer_done(KvLayerDone done) override;
  std::vector<RoutedExpertSet*> routed_expert_sets() override;
  bool has_mtp() const override { return mtp_.has_value(); }
  Status forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) override;
  Status set_mtp_draft_vocab(std::span<const int32_t> ids) override;
  bool supports_mtp_drafting() const override { return has_mtp(); }
  bool supports_truncation() const override { return true; }  // all state paged: lower the counts

 private:
  DeepSeekV3(Checkpoint ckpt, const ModelConfig& cfg, const ModelOptions& opts);
  Status build();
  // Checks ids, lengths, duplicates and block tables; fills chunks_/pos_/block_tables_ for the
  // rows of the batch.
  Status plan_batch(std::span<SequenceState* const> seqs, std::span<const std::span<const int32_t>> tokens,
                    bool mtp);
  // out.hidden / hidden_row_begin after the final norm (normed_, sel_ and x_ hold the forward's rows).
  void fill_hidden(std::span<const ForwardRequest> requests, LogitsOutput& out);
  // Layer slots of the cache: one per main layer, then the MTP layer's.
  int n_cache_slots() const { return cfg_.num_hidden_layers + (has_mtp() ? 1 : 0); }

  Checkpoint ckpt_;  // owns the mappings every WeightMatrix points into
  ModelConfig cfg_;
  ModelOptions opts_;
  std::unique_ptr<ThreadPool> pool_;
  ForwardContext ctx_;
  MlaDims dims_;
  std::vector<float> inv_freq_;  // RoPE frequencies [qk_rope_head_dim / 2]
  Embedding embed_;
  std::vector<DecoderLayer> layers_;
  std::vector<float> final_norm_;
  std::optional<Linear> lm_head_;
  WeightMatrix head_;  // lm_head_->w, or the embedding with tie_word_embeddings
  std::optional<MtpLayer> mtp_;
  KvLayerDone kv_layer_done_;  // set_kv_layer_done: called after each main layer of forward()
  KvCacheConfig kv_config_;    // n_blocks 0 until init_kv_cache
  PagedLatentCache kv_;

  // Per-forward bookkeeping and scratch, reused (no allocation in steady decode).
  std::vector<SeqChunk> chunks_;
  std::vector<int32_t> pos_;
  std::vector<const int32_t*> block_tables_;  // [n_requests] each request's block_table.data()
  BlockUseCheck block_check_;
  std::vector<SequenceState*> seqs_;
  std::vector<std::span<const int32_t>> tokens_;
  std::vector<int32_t> flat_tokens_;
  std::vector<uint8_t> mtp_draft_;  // [n_requests] MtpRequest::draft, for plan_batch
  TensorF32 hidden_sel_;            // [n_hidden_rows, hidden] rows gathered for all_hidden
  TensorF32 x_;                     // [n_rows, hidden] residual stream
  TensorF32 sel_;                   // [n_out_rows, hidden] rows that produce logits
  TensorF32 normed_;                // [n_out_rows, hidden]
  LayerScratch layer_scratch_;
  MtpScratch mtp_scratch_;
};

}  // namespace ds
