#include "cluster/pd/layer_copies.h"

#include <cstring>

namespace ds::pd {

LayerCopies::LayerCopies(std::vector<KvPageArray> local, const transport::KvGrant& grant,
                         std::shared_ptr<const transport::SharedPageMapping> mapping,
                         std::span<std::byte> layer_buffer, int64_t first_granted)
    : local_(std::move(local)),
      grant_(grant),
      mapping_(std::move(mapping)),
      buffer_(layer_buffer),
      first_granted_(first_granted) {
  const size_t n_arrays = local_.size(), n_granted = grant_.block_ids.size();
  copied_.assign(n_granted * n_arrays, 0);
  arrays_copied_.assign(n_granted, 0);
  usable_ = n_arrays == grant_.arrays.size() && n_arrays > 0 && (mapping_ != nullptr || !buffer_.empty());
  for (size_t a = 0; usable_ && a < n_arrays; ++a)
    usable_ =
        local_[a].layer >= 0 && static_cast<uint64_t>(local_[a].block_bytes) == grant_.arrays[a].block_bytes;
  // Every granted page's address on the decode side (and, same host, in the mapping), once: the
  // copies during the forwards only look them up.
  remote_.resize(usable_ ? n_granted * n_arrays : 0);
  if (mapping_ != nullptr) mapped_.resize(remote_.size());
  for (size_t g = 0; usable_ && g < n_granted; ++g) {
    for (size_t a = 0; usable_ && a < n_arrays; ++a) {
      const uint64_t bytes = grant_.arrays[a].block_bytes;
      const uint64_t at = grant_.arrays[a].address + uint64_t{grant_.block_ids[g]} * bytes;
      remote_[g * n_arrays + a] = at;
      usable_ = grant_.region_of(at, bytes) != nullptr;
      if (!usable_ || mapping_ == nullptr) continue;
      const transport::SharedRange* r = grant_.shared_range_of(at, bytes);
      mapped_[g * n_arrays + a] = r == nullptr ? nullptr : mapping_->at(r->offset + (at - r->address), bytes);
      usable_ = mapped_[g * n_arrays + a] != nullptr;
    }
  }
}

void LayerCopies::layer_done(int layer, int64_t first_block, std::span<const int32_t> pool_ids) {
  std::lock_guard lock(mu_);
  if (closed_ || !usable_) return;
  const size_t n_arrays = local_.size();
  for (size_t a = 0; a < n_arrays; ++a) {
    if (local_[a].layer != layer) continue;
    const size_t bytes = static_cast<size_t>(local_[a].block_bytes);
    for (size_t k = 0; k < pool_ids.size(); ++k) {
      const int64_t g = first_block + static_cast<int64_t>(k) - first_granted_;
      if (g < 0 || g >= static_cast<int64_t>(grant_.block_ids.size())) continue;  // not granted: D's own hit
      const std::byte* page = local_[a].base + int64_t{pool_ids[k]} * local_[a].block_bytes;
      const size_t at = static_cast<size_t>(g) * n_arrays + a;
      if (mapping_ != nullptr) {
        std::memcpy(mapped_[at], page, bytes);
      } else {
        if (buffer_used_ + bytes > buffer_.size()) continue;  // full: the outbox path writes this block
        std::memcpy(buffer_.data() + buffer_used_, page, bytes);
        const uint64_t to = remote_[at];
        StagedPut* last = staged_.empty() ? nullptr : &staged_.back();
        if (last != nullptr && last->array == a && last->offset + last->bytes == buffer_used_ &&
            last->remote + last->bytes == to)
          last->bytes += bytes;  // the next page of a run of consecutive pool blocks: one put
        else
          staged_.push_back({buffer_used_, bytes, to, a});
        buffer_used_ += bytes;
      }
      uint8_t& done = copied_[at];
      if (done == 0) {
        done = 1;
        ++arrays_copied_[static_cast<size_t>(g)];
        bytes_ += static_cast<int64_t>(bytes);
      }
    }
  }
}

std::vector<LayerCopies::StagedPut> LayerCopies::take_staged() {
  std::lock_guard lock(mu_);
  std::vector<StagedPut> out;
  out.swap(staged_);
  return out;
}

bool LayerCopies::complete(size_t g) const {
  std::lock_guard lock(mu_);
  return usable_ && g < arrays_copied_.size() && arrays_copied_[g] == local_.size();
}

int64_t LayerCopies::bytes() const {
  std::lock_guard lock(mu_);
  return bytes_;
}

void LayerCopies::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  mapping_.reset();
}

}  // namespace ds::pd
