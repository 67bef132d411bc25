#include "model/kv_cache.h"

#include <cstring>

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>

#include "base/assert.h"

namespace ds {

namespace {

Status bad_config(const std::string& what) {
  return Status(ErrorCode::invalid_argument, "KV cache: " + what);
}

}  // namespace

int64_t blocks_for_tokens(int64_t n_tokens, int32_t block_size_tokens) {
  DS_ASSERT(block_size_tokens > 0, "block size must be positive");
  return (n_tokens + block_size_tokens - 1) / block_size_tokens;
}

int32_t default_block_size_tokens(const KvCacheLayout& layout) {
  return std::lcm(int32_t{64}, std::max<int32_t>(1, layout.block_size_multiple));
}

KvCacheConfig standalone_kv_cache_config(int64_t max_tokens, int32_t block_size_tokens) {
  KvCacheConfig c;
  c.block_size_tokens = block_size_tokens;
  const int64_t n =
      block_size_tokens > 0 ? blocks_for_tokens(std::max<int64_t>(max_tokens, 1), block_size_tokens) : 0;
  c.n_blocks = static_cast<int32_t>(std::min<int64_t>(n, std::numeric_limits<int32_t>::max()));
  return c;
}

SequenceState make_standalone_sequence(const KvCacheConfig& cfg) {
  SequenceState s;
  s.block_table.resize(static_cast<size_t>(std::max(cfg.n_blocks, 0)));
  for (size_t i = 0; i < s.block_table.size(); ++i) s.block_table[i] = static_cast<int32_t>(i);
  s.state_slot = 0;  // the only sequence: V4's first state slot (V3 ignores it)
  return s;
}

void truncate_sequence(SequenceState& seq, int64_t n_tokens) {
  DS_ASSERT(n_tokens >= 0 && n_tokens <= seq.n_tokens, "truncate beyond the sequence");
  seq.n_tokens = n_tokens;
  seq.n_mtp_tokens = std::min(seq.n_mtp_tokens, n_tokens);
}

Result<PagedLatentCache> PagedLatentCache::allocate(int n_slots, int64_t row_dim, const KvCacheConfig& cfg,
                                                    int32_t block_size_multiple, int64_t max_bytes) {
  DS_ASSERT(n_slots > 0 && row_dim > 0 && block_size_multiple > 0, "the model passes its own shape");
  if (cfg.block_size_tokens < 1 || cfg.block_size_tokens % block_size_multiple != 0) {
    return bad_config("block_size_tokens " + std::to_string(cfg.block_size_tokens) +
                      " must be a positive multiple of " + std::to_string(block_size_multiple));
  }
  if (cfg.n_blocks < 1) return bad_config("n_blocks " + std::to_string(cfg.n_blocks) + " must be > 0");
  // bytes = n_slots · n_blocks · block_size · row_dim · 4, checked for overflow step by step.
  int64_t bytes = static_cast<int64_t>(sizeof(float)) * row_dim;
  for (int64_t factor : {int64_t{n_slots}, int64_t{cfg.n_blocks}, int64_t{cfg.block_size_tokens}}) {
    if (bytes > std::numeric_limits<int64_t>::max() / factor) {
      bytes = std::numeric_limits<int64_t>::max();
      break;
    }
    bytes *= factor;
  }
  if (bytes > max_bytes) {
    return bad_config(std::to_string(cfg.n_blocks) + " blocks of " + std::to_string(cfg.block_size_tokens) +
                      " tokens need " + std::to_string(bytes) + " bytes, over the limit of " +
                      std::to_string(max_bytes));
  }
  PagedLatentCache c;
  // 64-byte aligned so each block starts on a cache line when a row is (a V3 row is 2304 bytes).
  c.pages_ = PageBuffer(cfg.memory, static_cast<size_t>(bytes));
  if (c.data() == nullptr) return bad_config("could not allocate " + std::to_string(bytes) + " bytes");
  c.cfg_ = cfg;
  c.n_slots_ = n_slots;
  c.row_dim_ = row_dim;
  return c;
}

int64_t PagedLatentCache::bytes() const {
  return static_cast<int64_t>(sizeof(float)) * n_slots_ * cfg_.n_blocks * cfg_.block_size_tokens * row_dim_;
}

LatentLayerView PagedLatentCache::slot(int i) const {
  DS_ASSERT(i >= 0 && i < n_slots_, "layer slot out of range");
  LatentLayerView v;
  v.blocks = data() + static_cast<int64_t>(i) * cfg_.n_blocks * cfg_.block_size_tokens * row_dim_;
  v.n_blocks = cfg_.n_blocks;
  v.block_size = cfg_.block_size_tokens;
  v.row_dim = row_dim_;
  return v;
}

int64_t PagedLatentCache::block_bytes(int n_slots) const {
  return static_cast<int64_t>(sizeof(float)) * n_slots * cfg_.block_size_tokens * row_dim_;
}

void PagedLatentCache::export_block(int32_t block_id, int n_slots, std::byte* out) const {
  DS_ASSERT(block_id >= 0 && block_id < cfg_.n_blocks && n_slots <= n_slots_, "block export out of range");
  const size_t slot_bytes = sizeof(float) * static_cast<size_t>(cfg_.block_size_tokens * row_dim_);
  for (int s = 0; s < n_slots; ++s) std::memcpy(out + s * slot_bytes, slot(s).block(block_id), slot_bytes);
}

void PagedLatentCache::import_block(int32_t block_id, int n_slots, const std::byte* in) {
  DS_ASSERT(block_id >= 0 && block_id < cfg_.n_blocks && n_slots <= n_slots_, "block import out of range");
  const size_t slot_bytes = sizeof(float) * static_cast<size_t>(cfg_.block_size_tokens * row_dim_);
  for (int s = 0; s < n_slots; ++s) std::memcpy(slot(s).block(block_id), in + s * slot_bytes, slot_bytes);
}

void PagedLatentCache::append_page_arrays(int n_slots, std::vector<KvPageArray>& out) const {
  DS_ASSERT(n_slots <= n_slots_, "page arrays out of range");
  for (int s = 0; s < n_slots; ++s)
    out.push_back({reinterpret_cast<std::byte*>(slot(s).blocks), block_bytes(1), s});
}

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<int64_t>(pages) * page_size;
}

Status BlockUseCheck::add(int32_t request, std::span<const int32_t> block_table, int64_t first_pos,
                          int64_t end_pos, const KvCacheConfig& cfg) {
  // Built only on the error path: a decode step allocates nothing here.
  auto which = [request] { return "request " + std::to_string(request) + ": "; };
  if (cfg.n_blocks < 1 || cfg.block_size_tokens < 1) {
    return Status(ErrorCode::model_bad_input, which() + "the KV cache is not initialised (init_kv_cache)");
  }
  DS_ASSERT(0 <= first_pos && first_pos <= end_pos, "the model checks positions first");
  const int64_t n_used = blocks_for_tokens(end_pos, cfg.block_size_tokens);
  if (static_cast<int64_t>(block_table.size()) < n_used) {
    return Status(ErrorCode::model_bad_input,
                  which() + "block table has " + std::to_string(block_table.size()) +
                      " blocks, positions up to " + std::to_string(end_pos - 1) + " need " +
                      std::to_string(n_used) + " (block size " + std::to_string(cfg.block_size_tokens) + ")");
  }
  const int64_t first_written = first_pos / cfg.block_size_tokens;
  for (int64_t i = 0; i < n_used; ++i) {
    const int32_t id = block_table[static_cast<size_t>(i)];
    if (id < 0 || id >= cfg.n_blocks) {
      return Status(ErrorCode::model_bad_input, which() + "block table entry " + std::to_string(i) +
                                                    " is block " + std::to_string(id) + ", outside [0, " +
                                                    std::to_string(cfg.n_blocks) + ")");
    }
    // An empty range [first_pos, end_pos) writes nothing, whatever block first_pos falls in.
    uses_.push_back(Use{id, request, static_cast<int32_t>(i), i >= first_written && first_pos < end_pos});
  }
  return ok_status();
}

Status BlockUseCheck::check_conflicts() {
  std::sort(uses_.begin(), uses_.end(), [](const Use& a, const Use& b) {
    if (a.block_id != b.block_id) return a.block_id < b.block_id;
    return a.written > b.written;  // a writer first in its group
  });
  for (size_t g = 0; g < uses_.size();) {
    size_t end = g + 1;
    while (end < uses_.size() && uses_[end].block_id == uses_[g].block_id) ++end;
    const Use& w = uses_[g];
    if (w.written && end - g > 1) {
      const Use& o = uses_[g + 1];
      const std::string block = "block " + std::to_string(w.block_id);
      if (o.request == w.request) {
        return Status(ErrorCode::model_bad_input,
                      "request " + std::to_string(w.request) + ": " + block +
                          " appears twice in its block table (entries " +
                          std::to_string(std::min(w.table_index, o.table_index)) + " and " +
                          std::to_string(std::max(w.table_index, o.table_index)) + ") and is written");
      }
      return Status(ErrorCode::model_bad_input,
                    "requests " + std::to_string(std::min(w.request, o.request)) + " and " +
                        std::to_string(std::max(w.request, o.request)) + ": " + block +
                        " is written by request " + std::to_string(w.request) + " and " +
                        (o.written ? "written" : "read") + " by request " + std::to_string(o.request) +
                        " in the same forward (a shared block must be read-only)");
    }
    g = end;
  }
  return ok_status();
}

}  // namespace ds
