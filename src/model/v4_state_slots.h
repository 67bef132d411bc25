// The per-sequence state slots of a model whose state cannot live in paged KV blocks alone (V4:
// window rings, compressor partial groups, MTP inputs; V4.1 the same): one V4SequenceSlot per
// SequenceState::state_slot, which a sequence holds from its first chunk on. The checks a batch
// needs before any change, and the take-over of a slot by a new (or replayed) sequence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model_runner.h"
#include "model/v4_kv_state.h"
#include "weights/layer_spec.h"
#include "weights/model_config.h"

namespace ds {

class V4StateSlots {
 public:
  void assign(size_t n_slots) { slots_.assign(n_slots, {}); }
  V4SequenceSlot& of(const SequenceState& seq) { return slots_[static_cast<size_t>(seq.state_slot)]; }
  const V4SequenceSlot& of(const SequenceState& seq) const {
    return slots_[static_cast<size_t>(seq.state_slot)];
  }
  size_t size() const { return slots_.size(); }

  // model_bad_input (prefixed by `which`) when seqs[r]'s slot is shared with an earlier request,
  // out of range, or (past its first chunk, and not starting a replay) no longer holds it.
  Status check(std::span<SequenceState* const> seqs, size_t r, bool starts_replay,
               const std::string& which) const;

  // The sequence's slot; a new sequence (n_tokens 0) or a replay start (`replay`) takes it over
  // fresh: empty layer states (main layers of `specs`, then the MTP layer when keep_mtp), with
  // the cached compressed entries below replay_end counted as present; its MTP state starts at the
  // slot's first position (a replay's MTP layer has no rows before it: drafts there are only worse).
  V4SequenceSlot& take(SequenceState& seq, bool replay, int64_t replay_end, const ModelConfig& cfg,
                       const std::vector<LayerSpec>& specs, bool keep_mtp);

  // The sequence's slot taken over at seq.n_tokens from an exported state (v4_state_codec.h): the
  // main layers from `state`, the rest fresh as on a replay start. model_bad_input (the slot left as
  // it was) for a state of another shape or position.
  // The most bytes an exported state of this model takes (a full Engram history of `engram_keep`
  // ids, every row kept in f32).
  static int64_t encoded_bytes(const ModelConfig& cfg, const std::vector<LayerSpec>& specs,
                               int64_t engram_keep);

  // `state` decoded against this model's fresh layer shapes; model_bad_input unless it is at n_tokens.
  static Result<V4SequenceSlot> decode(std::span<const std::byte> state, int64_t n_tokens,
                                       const ModelConfig& cfg, const std::vector<LayerSpec>& specs);
  Status import(SequenceState& seq, std::span<const std::byte> state, const ModelConfig& cfg,
                const std::vector<LayerSpec>& specs, bool keep_mtp);

 private:
  std::vector<V4SequenceSlot> slots_;
};

}  // namespace ds
