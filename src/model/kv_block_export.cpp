// ModelRunner's KV tier block copy (model_runner.h) for DeepSeek-V3 and V4: the bytes of one
// paged block, every cache kind and layer the engine uses, in a fixed order. Window rings and
// compressor partial groups (V4) are not paged and not in a block: a restored prefix rebuilds them
// by SWA bounded replay, as any pool hit does — or, where one sequence hands over to another at a
// known position (P/D), they move whole as the sequence state (export/import_sequence_state).
#include <string>

#include "model/deepseek_v3.h"
#include "model/deepseek_v4.h"
#include "model/v4_state_codec.h"

namespace ds {

namespace {

Status check_block(int32_t block_id, size_t n_bytes, const KvCacheConfig& cfg, int64_t block_bytes) {
  if (block_id < 0 || block_id >= cfg.n_blocks) {
    return Status(ErrorCode::model_bad_input, "KV block " + std::to_string(block_id) + " is outside [0, " +
                                                  std::to_string(cfg.n_blocks) + ")");
  }
  if (static_cast<int64_t>(n_bytes) != block_bytes) {
    return Status(ErrorCode::model_bad_input, "KV block buffer of " + std::to_string(n_bytes) +
                                                  " bytes, expected " + std::to_string(block_bytes));
  }
  return ok_status();
}

}  // namespace

// V3: the main layers' latent rows, then the MTP layer's when the cache keeps it.
int64_t DeepSeekV3::kv_block_bytes() const {
  if (kv_.empty()) return 0;
  return kv_.block_bytes(cfg_.num_hidden_layers + (has_mtp() && kv_config_.mtp_layer ? 1 : 0));
}

std::string DeepSeekV3::kv_layout_tag() const {
  return "deepseek_v3/mla_latent/f32/row" + std::to_string(dims_.latent_row()) +
         (has_mtp() && kv_config_.mtp_layer ? "/mtp" : "");
}

Status DeepSeekV3::export_kv_block(int32_t block_id, std::span<std::byte> out) const {
  DS_TRY(check_block(block_id, out.size(), kv_config_, kv_block_bytes()));
  kv_.export_block(block_id, cfg_.num_hidden_layers + (has_mtp() && kv_config_.mtp_layer ? 1 : 0),
                   out.data());
  return ok_status();
}

Status DeepSeekV3::import_kv_block(int32_t block_id, std::span<const std::byte> in) {
  DS_TRY(check_block(block_id, in.size(), kv_config_, kv_block_bytes()));
  kv_.import_block(block_id, cfg_.num_hidden_layers + (has_mtp() && kv_config_.mtp_layer ? 1 : 0), in.data());
  return ok_status();
}

std::vector<KvPageArray> DeepSeekV3::kv_page_arrays() {
  std::vector<KvPageArray> arrays;
  if (!kv_.empty())
    kv_.append_page_arrays(cfg_.num_hidden_layers + (has_mtp() && kv_config_.mtp_layer ? 1 : 0), arrays);
  return arrays;
}

bool DeepSeekV3::set_kv_layer_done(KvLayerDone done) {
  kv_layer_done_ = std::move(done);
  return true;
}

// V4: per layer slot in order, its compressed entries then (CSA) its indexer keys.
int64_t DeepSeekV4::kv_block_bytes() const {
  if (kv_config_.n_blocks == 0) return 0;
  int64_t bytes = 0;
  for (size_t layer = 0; layer < comp_pages_.size(); ++layer) {
    if (!comp_pages_[layer].empty()) bytes += comp_pages_[layer].block_bytes(1);
    if (!idx_pages_[layer].empty()) bytes += idx_pages_[layer].block_bytes(1);
  }
  return bytes;
}

std::string DeepSeekV4::kv_layout_tag() const {
  return std::string(v41_ ? "deepseek_v41/sources" : "deepseek_v4") + "/compressed+indexer/f32" +
         std::string(kv_config_.mtp_layer && has_mtp() ? "/mtp" : "");
}

Status DeepSeekV4::export_kv_block(int32_t block_id, std::span<std::byte> out) const {
  DS_TRY(check_block(block_id, out.size(), kv_config_, kv_block_bytes()));
  std::byte* p = out.data();
  for (size_t layer = 0; layer < comp_pages_.size(); ++layer) {
    for (const PagedLatentCache* pages : {&comp_pages_[layer], &idx_pages_[layer]}) {
      if (pages->empty()) continue;
      pages->export_block(block_id, 1, p);
      p += pages->block_bytes(1);
    }
  }
  return ok_status();
}

Status DeepSeekV4::import_kv_block(int32_t block_id, std::span<const std::byte> in) {
  DS_TRY(check_block(block_id, in.size(), kv_config_, kv_block_bytes()));
  const std::byte* p = in.data();
  for (size_t layer = 0; layer < comp_pages_.size(); ++layer) {
    for (PagedLatentCache* pages : {&comp_pages_[layer], &idx_pages_[layer]}) {
      if (pages->empty()) continue;
      pages->import_block(block_id, 1, p);
      p += pages->block_bytes(1);
    }
  }
  return ok_status();
}

std::vector<KvPageArray> DeepSeekV4::kv_page_arrays() {
  std::vector<KvPageArray> arrays;
  if (kv_config_.n_blocks == 0) return arrays;
  for (size_t layer = 0; layer < comp_pages_.size(); ++layer) {
    for (const PagedLatentCache* pages : {&comp_pages_[layer], &idx_pages_[layer]}) {
      if (pages->empty()) continue;
      pages->append_page_arrays(1, arrays);
      arrays.back().layer = static_cast<int>(layer);
    }
  }
  return arrays;
}

bool DeepSeekV4::set_kv_layer_done(KvLayerDone done) {
  // With index keys published on a group (numerics index_keys=on_group) a later layer's indexer
  // writes an earlier layer's keys: no layer's pages are final when it ends.
  kv_layer_done_ = num_.index_keys_on_group ? nullptr : std::move(done);
  return !num_.index_keys_on_group;
}

int64_t DeepSeekV4::sequence_state_bytes() const {
  return V4StateSlots::encoded_bytes(cfg_, specs_, engram_.empty() ? 0 : engram_.rules().n_slots - 1);
}

Result<std::vector<std::byte>> DeepSeekV4::export_sequence_state(const SequenceState& seq) const {
  if (seq.state_slot < 0 || static_cast<size_t>(seq.state_slot) >= slots_.size())
    return Status(ErrorCode::model_bad_input,
                  "export: state_slot " + std::to_string(seq.state_slot) + " out of range");
  const V4SequenceSlot& slot = slots_.of(seq);
  if (!slot.in_use || slot.n_tokens != seq.n_tokens) {
    return Status(ErrorCode::model_bad_input, "export: state slot " + std::to_string(seq.state_slot) +
                                                  " does not hold this sequence at " +
                                                  std::to_string(seq.n_tokens) + " tokens");
  }
  return encode_v4_state(slot);
}

Status DeepSeekV4::check_sequence_state(std::span<const std::byte> state, int64_t n_tokens) const {
  return V4StateSlots::decode(state, n_tokens, cfg_, specs_).status();
}

Status DeepSeekV4::import_sequence_state(SequenceState& seq, std::span<const std::byte> state) {
  return slots_.import(seq, state, cfg_, specs_, keeps_mtp_state());
}

}  // namespace ds
