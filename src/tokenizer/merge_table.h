// BPE merge rules keyed by the pair of token ids they join: (left, right) -> (rank, merged id).
// An open-addressing table sized to a power of two at ≤ 50% load, because the merge loop does
// one lookup per adjacent pair and std::unordered_map's node chasing dominated profiles.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace ds {

struct BpeMerge {
  int32_t rank;       // position in the merges list: lower merges first
  int32_t merged_id;  // id of the token spelled left + right
};

class MergeTable {
 public:
  explicit MergeTable(size_t n_merges_expected = 0);

  // Returns false if the pair was already present; its entry is then overwritten, because HF
  // collects merges into a map and so the last duplicate wins.
  bool insert(int32_t left_id, int32_t right_id, BpeMerge merge);

  std::optional<BpeMerge> find(int32_t left_id, int32_t right_id) const {
    const uint64_t key = pack(left_id, right_id);
    for (size_t slot = hash(key) & mask_;; slot = (slot + 1) & mask_) {
      const Slot& s = slots_[slot];
      if (s.key == key) return BpeMerge{s.rank, s.merged_id};
      if (s.key == kEmptyKey) return std::nullopt;
    }
  }

  size_t size() const { return n_used_; }

 private:
  struct Slot {
    uint64_t key;
    int32_t rank;
    int32_t merged_id;
  };
  static constexpr uint64_t kEmptyKey = ~uint64_t{0};  // ids are ≥ 0, so never a real key

  static uint64_t pack(int32_t left_id, int32_t right_id) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left_id)) << 32) | static_cast<uint32_t>(right_id);
  }
  static size_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  void grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t n_used_ = 0;
};

}  // namespace ds
