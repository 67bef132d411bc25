#include "engine/sequence_slots.h"

#include <string>

namespace ds {

SequenceSlots::SequenceSlots(int32_t n_slots) : n_slots_(n_slots) {
  for (int32_t slot = n_slots - 1; slot >= 0; --slot) free_slots_.push_back(slot);
}

Result<int32_t> SequenceSlots::slot_for(SeqId seq_id) {
  if (auto it = slot_of_.find(seq_id); it != slot_of_.end()) return it->second;
  if (free_slots_.empty()) {
    return Status(ErrorCode::internal,
                  "all " + std::to_string(n_slots_) +
                      " sequence state slots are in use (more running sequences than slots)");
  }
  const int32_t slot = free_slots_.back();
  free_slots_.pop_back();
  slot_of_.emplace(seq_id, slot);
  return slot;
}

void SequenceSlots::reclaim(const std::function<bool(SeqId)>& still_running) {
  for (auto it = slot_of_.begin(); it != slot_of_.end();) {
    if (still_running(it->first)) {
      ++it;
      continue;
    }
    free_slots_.push_back(it->second);
    it = slot_of_.erase(it);
  }
}

}  // namespace ds
