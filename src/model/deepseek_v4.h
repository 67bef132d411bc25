// DeepSeek-V4-Flash (model-spec §4): embedding into hc_mult residual streams, V4 blocks (mHC,
// SWA/CSA/HCA attention, hash/score-routed MoE with FP4 experts), hyper-head, final norm, head,
// and the MTP layer, from a checkpoint with DeepSeek's own tensor names (`layers.N.*`, `mtp.K.*`).
// The math follows tests/reference/deepseek_v4_ref.py (README "V4") switch for switch.
//
// State: the compressed entries and indexer keys are paged in the sequence's KV blocks (a block
// of block_size tokens holds block_size / ratio entries per compressed layer; block_size must be a
// multiple of every ratio). The rest (window rings, compressor partial groups, MTP ring,
// unconsumed final streams) lives in a slot the model owns (SequenceState::state_slot,
// KvCacheConfig::n_sequence_slots). The rings and partial groups are not in the blocks, so a
// sequence that starts on a shared cached prefix of H tokens rebuilds them by SWA bounded replay
// (ForwardRequest::replay_end = H, from H - swa_replay_tokens on a fresh slot; replayed rows read the
// cached entries and write only entries >= H / ratio). Roll-back: only inside the last chunk when it
// ran with ForwardRequest::may_truncate (model/v4_chunk_undo.h); any other forward at a position the
// slot has not reached (or has passed) is model_bad_input.
//
// MTP (model/deepseek_v4_mtp.cpp): forward_mtp reads the main final streams [hc, hidden] the slot
// kept for positions [n_mtp_tokens, n_tokens); MtpRequest::hidden may be null and is not read (V4's
// MTP needs all hc streams, the LogitsOutput::hidden rows are only the normed collapse). A draft row
// (MtpRequest::draft, one per request) reads instead the layer's own output streams of the row
// before, which the slot keeps; the ring slots draft rows overwrite are put back by the next MTP
// call that is not a draft, so drafting leaves no trace (docs/speculative.md, V4).
//
// The same runner serves DeepSeek-V4.1 (model_type deepseek_v41, model-spec §5; loaded through
// deepseek_v41.h): its differences are in the layer specs (weights/layer_spec.h: CSA2 sources,
// index sources, candidate pool) and the blocks' options, plus two here: the delayed mHC pre
// carried from block to block with no hyper-head (§5.1), and caches only for the layers that own
// them, readers reading their source's pages. V4.1's DSpark stages (docs/dspark.md) are this
// model's DraftBlockModel: with them, a forward in which some request asks all_hidden gives their
// context features as every LogitsOutput::hidden row (otherwise the final normed rows, at no cost).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/decoder_replay.h"
#include "model/embedding.h"
#include "model/forward_context.h"
#include "model/linear.h"
#include "model/model_options.h"
#include "model/model_runner.h"
#include "model/swa_replay.h"
#include "model/v41_dspark.h"
#include "model/v41_engram.h"
#include "model/v4_block.h"
#include "model/v4_kv_state.h"
#include "model/v4_mhc.h"
#include "model/v4_mtp.h"
#include "model/v4_numerics.h"
#include "model/v4_scratch.h"
#include "model/v4_state_slots.h"
#include "weights/checkpoint.h"
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds {

class DeepSeekV4 final : public ModelRunner, public DraftBlockModel {
 public:
  static Result<std::unique_ptr<DeepSeekV4>> load(const std::string& dir, const ModelOptions& opts,
                                                  const V4Numerics& num = {});
  static Result<std::unique_ptr<DeepSeekV4>> load(Checkpoint ckpt, const ModelConfig& cfg,
                                                  const ModelOptions& opts, const V4Numerics& num = {});

  const ModelConfig& config() const override { return cfg_; }
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
  int64_t sequence_state_bytes() const override;
  Result<std::vector<std::byte>> export_sequence_state(const SequenceState& seq) const override;
  Status import_sequence_state(SequenceState& seq, std::span<const std::byte> state) override;
  Status check_sequence_state(std::span<const std::byte> state, int64_t n_tokens) const override;
  std::vector<RoutedExpertSet*> routed_expert_sets() override;
  bool has_mtp() const override { return mtp_.has_value(); }
  // Journaled chunks (model/v4_chunk_undo.h); not with the release's index-key publishing, whose
  // choice of publisher a roll-back cannot restore.
  bool supports_truncation() const override { return !num_.index_keys_on_group; }
  DraftBlockModel* draft_block_model() override { return dspark_ ? this : nullptr; }
  // DraftBlockModel (V4.1 DSpark, model/v41_dspark.h).
  int block_size() const override { return dspark_ ? dspark_->block_size() : 0; }
  int64_t fed(const SequenceState& seq) const override;
  Status extend(SequenceState& seq, int64_t pos, std::span<const float> features) override;
  Status draft(std::span<const DraftBlockRequest> requests, DraftBlockOutput& out) override;
  void add_markov_bias(int32_t prev, std::span<float> logits) override;
  float confidence(std::span<const float> h, int32_t prev) const override;
  Status forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) override;
  // MTP drafting needs journaled target chunks and a window-only MTP layer (model-spec §4.10).
  bool supports_mtp_drafting() const override;
  Status set_mtp_draft_vocab(std::span<const int32_t> ids) override;

 private:
  DeepSeekV4(Checkpoint ckpt, const ModelConfig& cfg, const ModelOptions& opts, const V4Numerics& num);
  Status build();
  // Validates one batch (ids, lengths, duplicates, block tables, state slots) before any change.
  // replay_ends: ForwardRequest::replay_end per request (empty for MTP batches).
  // may_truncate: ForwardRequest::may_truncate per request (empty for MTP batches).
  // mtp_draft: MtpRequest::draft per request (empty: none).
  Status check_batch(std::span<SequenceState* const> seqs, std::span<const std::span<const int32_t>> tokens,
                     std::span<const int64_t> replay_ends, bool mtp,
                     std::span<const uint8_t> may_truncate = {}, std::span<const uint8_t> mtp_draft = {});
  // What forward_mtp needs of request r's slot beyond check_batch (model_bad_input naming it).
  Status check_mtp_request(const MtpRequest& req, size_t r) const;
  // Whether slots keep the MTP layer's state and the final streams it will read.
  bool keeps_mtp_state() const { return has_mtp() && kv_config_.mtp_layer; }
  // The paged entries of layer slot `layer` (main layers, then MTP) for one block table.
  V4LayerPages pages_for(int layer, const int32_t* block_table) const;
  // Decoder replay: moves each request's rows from skip[r] on to the front of the step's row
  // arrays (streams, pos, ids, carried pre, Engram ids, with `features` DSpark's stream means) and
  // renumbers first_row.
  void compact_decoder_rows(std::span<const int64_t> skip, std::vector<int64_t>& first_row, float* streams,
                            std::vector<int32_t>& pos, std::vector<int32_t>& ids, double* carried,
                            bool features);
  // DSpark: the stream means of rows [0, n) entering main layer `layer`, into its columns of
  // dspark_feat_ when it is a target layer.
  void capture_dspark_means(int layer, const float* streams, int64_t n);
  // LogitsOutput::hidden: for request r its hidden rows (all rows that reached the head with
  // all_hidden, else its logits rows), ending at row first_row[r + 1] of the step's arrays; the
  // final rows h, or with `features` (DSpark, some request with all_hidden) their context features.
  void fill_hidden(std::span<const ForwardRequest> requests, const std::vector<int64_t>& first_row,
                   const float* h, bool features, LogitsOutput& out);
  int n_layer_slots() const { return cfg_.num_hidden_layers + (has_mtp() ? 1 : 0); }

  Checkpoint ckpt_;
  ModelConfig cfg_;
  ModelOptions opts_;
  V4Numerics num_;
  std::unique_ptr<ThreadPool> pool_;
  ForwardContext ctx_;
  Embedding embed_;
  bool v41_ = false;
  int decoder_first_layer_ = -1;  // V4.1 decoder replay on: the first decoder layer (decoder_replay.h)
  std::vector<LayerSpec> specs_;  // every layer slot's role (main layers, then MTP)
  std::vector<V4Block> layers_;
  MhcHead hc_head_;  // V4 only
  std::vector<float> final_norm_;
  Linear head_;
  std::optional<V4Mtp> mtp_;
  std::vector<uint8_t> draft_head_storage_;
  WeightMatrix draft_head_;  // rows of head_ for the MTP draft vocabulary (rows = 0: none)
  std::optional<V41DSpark> dspark_;
  std::vector<float> dspark_feat_;  // [rows, |T|·hidden] the step's target stream means
  KvLayerDone kv_layer_done_;       // set_kv_layer_done: called after each main layer of forward()
  KvCacheConfig kv_config_;
  V4StateSlots slots_;
  // Per layer slot (main layers, then MTP): compressed entries [n_blocks, bs / ratio, head_dim]
  // and indexer keys [n_blocks, bs / ratio, index_head_dim]; empty where the layer has none.
  std::vector<PagedLatentCache> comp_pages_, idx_pages_;
  BlockUseCheck block_check_;
  SwaReplay replay_;   // SWA bounded replay (its length W is kv_cache_layout().swa_replay_tokens)
  V4Scratch scratch_;  // every layer's working buffers, reused across layers and calls
  V41Engram engram_;   // V4.1: the Engram layers (empty without)
  std::vector<int64_t> engram_ids_;    // [rows, max_ngram] the step's compressed n-gram ids
  std::vector<uint8_t> engram_gated_;  // [rows] 0 for an image token
  std::vector<double> carried_pre_;    // V4.1: [rows, hc] the delayed mHC pre (V4Block::forward)
};

}  // namespace ds
