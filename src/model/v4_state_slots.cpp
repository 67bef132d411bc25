#include "model/v4_state_slots.h"

#include <algorithm>

#include "model/v4_chunk_undo.h"
#include "model/v4_state_codec.h"

namespace ds {

namespace {

Status bad_input(const std::string& what) { return Status(ErrorCode::model_bad_input, what); }

V4LayerState fresh_layer(const ModelConfig& cfg, const LayerSpec& spec) {
  V4LayerState st;
  // Readers (V4.1) keep only their window ring: their compressed entries are the source's.
  st.reset(cfg.sliding_window, cfg.head_dim, spec.owns_compressor() ? spec.compress_ratio : 0, spec.overlap,
           spec.index_compressor, cfg.index_head_dim);
  return st;
}

}  // namespace

Status V4StateSlots::check(std::span<SequenceState* const> seqs, size_t r, bool starts_replay,
                           const std::string& which) const {
  const SequenceState& seq = *seqs[r];
  for (size_t q = 0; q < r; ++q) {
    if (seqs[q]->state_slot == seq.state_slot)
      return bad_input(which + "state slot shared with request " + std::to_string(q));
  }
  if (seq.state_slot < 0 || seq.state_slot >= static_cast<int32_t>(slots_.size())) {
    return bad_input(which + "state_slot " + std::to_string(seq.state_slot) + " outside [0, " +
                     std::to_string(slots_.size()) + ")");
  }
  const V4SequenceSlot& slot = slots_[static_cast<size_t>(seq.state_slot)];
  const bool at = slot.n_tokens == seq.n_tokens || can_roll_back(slot, seq.n_tokens);
  if (seq.n_tokens > 0 && !starts_replay && (!slot.in_use || !at)) {
    return bad_input(which + "state slot " + std::to_string(seq.state_slot) +
                     " does not hold this sequence at " + std::to_string(seq.n_tokens) +
                     " tokens (V4 state rolls back only inside a may_truncate chunk; a shared prefix needs "
                     "replay_end)");
  }
  return ok_status();
}

V4SequenceSlot& V4StateSlots::take(SequenceState& seq, bool replay, int64_t replay_end,
                                   const ModelConfig& cfg, const std::vector<LayerSpec>& specs,
                                   bool keep_mtp) {
  V4SequenceSlot& slot = of(seq);
  if (seq.n_tokens != 0 && !replay) return slot;
  slot.in_use = true;
  slot.n_tokens = seq.n_tokens;
  slot.n_mtp_tokens =
      seq.n_tokens;  // the MTP layer starts where the slot starts (a replay: no MTP rows before)
  slot.pending_streams.clear();
  slot.mtp_out_streams.clear();
  slot.mtp_out_pos = slot.mtp_draft_begin = -1;
  slot.engram_history.clear();
  slot.published_index_keys = -1;  // a replay restarts W tokens early: see SwaReplay (Engram margin)
  slot.layers.clear();
  for (int l = 0; l < cfg.num_hidden_layers; ++l) {
    slot.layers.push_back(fresh_layer(cfg, specs[l]));
    const int ratio = specs[l].compress_ratio;
    if (replay && ratio > 0) {  // the prefix's entries are in the shared blocks already
      slot.layers.back().n_entries = replay_end / ratio;
      if (specs[l].owns_index_keys()) slot.layers.back().n_idx_keys = replay_end / ratio;
    }
  }
  slot.dspark_layers.clear();  // the drafter's context starts over (V41DSpark::reset_rings)
  slot.n_dspark_tokens = 0;
  slot.mtp_layers.clear();
  if (keep_mtp) slot.mtp_layers.push_back(fresh_layer(cfg, specs[cfg.num_hidden_layers]));
  return slot;
}

int64_t V4StateSlots::encoded_bytes(const ModelConfig& cfg, const std::vector<LayerSpec>& specs,
                                    int64_t engram_keep) {
  V4SequenceSlot slot;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) slot.layers.push_back(fresh_layer(cfg, specs[l]));
  slot.engram_history.assign(static_cast<size_t>(std::max<int64_t>(0, engram_keep)), 0);
  return max_encoded_v4_state_bytes(slot);
}

Result<V4SequenceSlot> V4StateSlots::decode(std::span<const std::byte> state, int64_t n_tokens,
                                            const ModelConfig& cfg, const std::vector<LayerSpec>& specs) {
  V4SequenceSlot fresh;
  for (int l = 0; l < cfg.num_hidden_layers; ++l) fresh.layers.push_back(fresh_layer(cfg, specs[l]));
  DS_TRY(decode_v4_state(state, fresh));
  if (fresh.n_tokens != n_tokens) {
    return bad_input("import: the state is at " + std::to_string(fresh.n_tokens) +
                     " tokens, the sequence at " + std::to_string(n_tokens));
  }
  return fresh;
}

Status V4StateSlots::import(SequenceState& seq, std::span<const std::byte> state, const ModelConfig& cfg,
                            const std::vector<LayerSpec>& specs, bool keep_mtp) {
  if (seq.state_slot < 0 || seq.state_slot >= static_cast<int32_t>(slots_.size()))
    return bad_input("import: state_slot " + std::to_string(seq.state_slot) + " out of range");
  DS_ASSIGN_OR_RETURN(V4SequenceSlot decoded, decode(state, seq.n_tokens, cfg, specs));
  V4SequenceSlot& slot = take(seq, /*replay=*/true, seq.n_tokens, cfg, specs, keep_mtp);
  slot.layers = std::move(decoded.layers);
  slot.engram_history = std::move(decoded.engram_history);
  slot.published_index_keys = decoded.published_index_keys;
  return ok_status();
}

}  // namespace ds
