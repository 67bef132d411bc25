#include "tokenizer/merge_table.h"

#include <algorithm>
#include <bit>

namespace ds {

MergeTable::MergeTable(size_t n_merges_expected) {
  const size_t n_slots = std::bit_ceil(std::max<size_t>(16, n_merges_expected * 2));
  slots_.assign(n_slots, Slot{kEmptyKey, 0, 0});
  mask_ = n_slots - 1;
}

bool MergeTable::insert(int32_t left_id, int32_t right_id, BpeMerge merge) {
  if ((n_used_ + 1) * 2 > slots_.size()) grow();
  const uint64_t key = pack(left_id, right_id);
  size_t slot = hash(key) & mask_;
  while (slots_[slot].key != kEmptyKey) {
    if (slots_[slot].key == key) {
      slots_[slot].rank = merge.rank;
      slots_[slot].merged_id = merge.merged_id;
      return false;
    }
    slot = (slot + 1) & mask_;
  }
  slots_[slot] = Slot{key, merge.rank, merge.merged_id};
  ++n_used_;
  return true;
}

void MergeTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.size() * 2, Slot{kEmptyKey, 0, 0});
  mask_ = slots_.size() - 1;
  n_used_ = 0;
  for (const Slot& s : old) {
    if (s.key == kEmptyKey) continue;
    insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key & 0xFFFFFFFFu),
           {s.rank, s.merged_id});
  }
}

}  // namespace ds
