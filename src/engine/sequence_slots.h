// SequenceSlots: which of the model's per-sequence state slots (V4: window rings, compressor
// partial groups; KvCacheConfig::n_sequence_slots) each running sequence owns. Models without
// unpaged state (V3) need none and the engine does not create this.
//
// A sequence takes a slot when it is first scheduled and gives it back once the scheduler no
// longer runs it (finished, cancelled, expired or preempted). The model resets a slot when a
// sequence's forward starts at position 0, so a slot needs no clearing. Reclaiming happens while the
// next step is planned; the step in flight (if any) completes before the next one launches, so a
// slot is never used by two sequences in the same step or by two steps at once.
//
// Not thread-safe: engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "kvcache/kv_cache_manager.h"

namespace ds {

class SequenceSlots {
 public:
  explicit SequenceSlots(int32_t n_slots);

  // The slot of seq_id, taking a free one on first use; `internal` when none is free (the
  // engine sizes n_slots >= max_running, so that is a bug).
  Result<int32_t> slot_for(SeqId seq_id);
  // Frees the slot of every sequence for which still_running() is false.
  void reclaim(const std::function<bool(SeqId)>& still_running);

  int32_t n_slots() const { return n_slots_; }
  int32_t n_used() const { return static_cast<int32_t>(slot_of_.size()); }

 private:
  int32_t n_slots_ = 0;
  std::unordered_map<SeqId, int32_t> slot_of_;
  std::vector<int32_t> free_slots_;  // back = next to hand out
};

}  // namespace ds
