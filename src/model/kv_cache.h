// The model's paged MLA latent cache. For every layer (and the MTP layer) and every cached
// position one row [kv_lora_rank normalised c_kv | qk_rope_head_dim RoPE'd k_pe] in f32: all that
// attention needs, shared by the heads. Rows live in fixed-size blocks; a sequence names its blocks
// in a block table (block i holds its positions [i·bs, (i+1)·bs) in every layer), so the engine can
// allocate and free blocks and let requests share the blocks of a cached prefix. The model only
// stores bytes: which block belongs to whom is the engine's bookkeeping (src/kvcache), and the
// model never includes it (block ids are plain int32_t here).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "base/page_memory.h"
#include "base/status.h"

namespace ds {

struct KvCacheConfig {
  int32_t block_size_tokens = 64;
  int32_t n_blocks = 0;
  // V4: slots of unpaged per-sequence state (window rings, compressor partial groups, compressed
  // entries) the model keeps; a sequence names one in SequenceState::state_slot. 0 = one per
  // block (no more sequences can be live than blocks). V3 ignores it.
  int32_t n_sequence_slots = 0;
  // false: the caller never runs forward_mtp, so the model keeps no state for it (V4: no MTP
  // window ring and no unconsumed final streams, which would otherwise grow by hc·hidden floats per
  // token). The engine keeps it only with speculative decoding; the CLI and tests that compare MTP
  // logits keep it.
  bool mtp_layer = true;
  // Where the page arrays live (null: the heap). The decode server of a P/D pair gives memory that
  // prefill servers on its host can map (docs/pd.md); the model just allocates from it.
  std::shared_ptr<PageMemory> memory = nullptr;
};

// What the model needs the engine to know, from ModelRunner::kv_cache_layout().
struct KvCacheLayout {
  // block_size_tokens must be a multiple of this (V4: lcm of the compress ratios; V3: 1).
  int32_t block_size_multiple = 1;
  // Paged bytes per cached token, all layers incl. MTP (for sizing the cache from a GB budget).
  int64_t bytes_per_token = 0;
  // Unpaged per-sequence state (V4 window rings + compressor state; V3: 0).
  int64_t bytes_per_sequence = 0;
  // SWA bounded replay length W (V4: the sliding window, at least every overlapping compressor's
  // ratio; V3: 0 = the state is all paged, prefix hits need no replay). A prefix hit of H > W
  // tokens is resumed by replaying [H - W, H) with ForwardRequest::replay_end = H.
  int32_t swa_replay_tokens = 0;
};

// Plain data, owned by the caller (engine / CLI); the model never allocates blocks. A forward
// writes the chunk's positions [n_tokens, n_tokens + n) into the blocks that hold them, reads
// positions [0, n_tokens + n), then advances n_tokens. Rollback = lower n_tokens (and
// n_mtp_tokens with it; the blocks stay). Blocks shared by several sequences (a cached prefix) are
// only read: a sequence writes only positions >= its n_tokens.
//
// MTP caveat for prefix sharing: the MTP row at position p is computed from the main model's
// hidden state at p and the token at p + 1, so a shared block's MTP rows are right for a sequence
// only if its token after the block's last position matches too. A sequence that shares k blocks
// may set n_mtp_tokens = k·bs only when its token at k·bs equals the one the blocks were built
// with; otherwise share one block fewer (as vLLM does for EAGLE drafts).
struct SequenceState {
  // Block i holds positions [i·bs, (i+1)·bs) of this sequence, for every layer.
  std::vector<int32_t> block_table;
  // Main-model positions cached = the next position.
  int64_t n_tokens = 0;
  // MTP layer positions cached (runs one behind; same blocks, its own layer slot).
  int64_t n_mtp_tokens = 0;
  // V4: the model's per-sequence state slot in [0, n_sequence_slots), owned by this sequence while
  // it lives (the engine assigns it; a forward at n_tokens 0 resets the slot). -1 = none (V3).
  int32_t state_slot = -1;
  // The length of the sequence's prompt when the caller knows it (0 = unknown, every row exact).
  // V4.1 decoder replay (model/decoder_replay.h) runs the decoder layers only on positions from
  // prompt_len − keep_tokens on; a recomputed (preempted) sequence keeps its original prompt_len.
  int64_t prompt_len = 0;
};

// Blocks that hold positions [0, n_tokens): ceil(n_tokens / block_size_tokens).
int64_t blocks_for_tokens(int64_t n_tokens, int32_t block_size_tokens);

// The block size to use when the caller has no preference: 64 tokens, raised to the smallest
// multiple of the model's block_size_multiple (V4: lcm of its compress ratios, 128 for V4-Flash).
int32_t default_block_size_tokens(const KvCacheLayout& layout);

// For standalone users (CLI, tests, benchmarks) that run sequences of up to max_tokens one at a
// time: blocks of block_size_tokens, just enough of them for one such sequence.
KvCacheConfig standalone_kv_cache_config(int64_t max_tokens, int32_t block_size_tokens = 64);
// A fresh sequence owning every block of `cfg` in order (block_table = 0 .. n_blocks - 1).
SequenceState make_standalone_sequence(const KvCacheConfig& cfg);
// Rollback: forgets positions >= n_tokens (main and MTP). Precondition: 0 <= n_tokens <= seq.n_tokens.
void truncate_sequence(SequenceState& seq, int64_t n_tokens);

// One array of a model's paged KV storage (ModelRunner::kv_page_arrays): block b's page is
// block_bytes bytes at base + b·block_bytes.
struct KvPageArray {
  std::byte* base = nullptr;
  int64_t block_bytes = 0;
  // The layer whose forward writes the array (ModelRunner::set_kv_layer_callback); the MTP layer's
  // is num_hidden_layers.
  int layer = -1;
};

// One layer slot of the paged storage: block b is [block_size, row_dim] f32 at
// blocks + b·block_size·row_dim.
struct LatentLayerView {
  float* blocks = nullptr;  // [n_blocks, block_size, row_dim]
  int32_t n_blocks = 0;
  int64_t block_size = 0;
  int64_t row_dim = 0;

  float* block(int32_t block_id) const { return blocks + block_id * block_size * row_dim; }
};

// The storage of every layer slot: per slot [n_blocks, block_size, row_dim] f32, one allocation,
// uninitialised (a row is read only after the forward that wrote it).
class PagedLatentCache {
 public:
  PagedLatentCache() = default;  // no storage: every block id is out of range

  // invalid_argument for a block size < 1 or not a multiple of block_size_multiple, no blocks,
  // more bytes than max_bytes (the caller's sanity limit, e.g. the machine's memory), or an
  // allocation that fails.
  static Result<PagedLatentCache> allocate(int n_slots, int64_t row_dim, const KvCacheConfig& cfg,
                                           int32_t block_size_multiple, int64_t max_bytes);

  const KvCacheConfig& config() const { return cfg_; }
  int n_slots() const { return n_slots_; }
  int64_t row_dim() const { return row_dim_; }
  int64_t bytes() const;
  bool empty() const { return data() == nullptr; }
  // Layer slot i (layer index; the MTP layer is the slot after the last main layer).
  LatentLayerView slot(int i) const;
  // KV tier export/import of one block: slots [0, n_slots) of block block_id, slot 0 first,
  // block_bytes(n_slots) bytes. Preconditions: block id in range, n_slots <= n_slots().
  int64_t block_bytes(int n_slots) const;
  void export_block(int32_t block_id, int n_slots, std::byte* out) const;
  void import_block(int32_t block_id, int n_slots, const std::byte* in);
  // Slots [0, n_slots) as page arrays (the block order of export_block), appended to `out`; slot s's
  // layer is s (the caller renames it where a slot is not a layer).
  void append_page_arrays(int n_slots, std::vector<KvPageArray>& out) const;

 private:
  float* data() const { return reinterpret_cast<float*>(pages_.data()); }

  PageBuffer pages_;  // from cfg.memory (the heap when none)
  KvCacheConfig cfg_{0, 0};
  int n_slots_ = 0;
  int64_t row_dim_ = 0;
};

// Physical memory of this machine in bytes (0 when unknown): the sanity limit for allocate().
int64_t physical_memory_bytes();

// Checks, before anything is written, how the requests of one forward use their block tables:
// request r reads positions [0, end_pos) and writes [first_pos, end_pos). Every block it touches
// must be in range, and a block written in the call must appear in no other table slot used by
// the call (two writers, or a writer and a reader of a block being filled, would make one
// request's result depend on the other). Scratch is reused between calls (no allocation in
// steady decode once sized).
class BlockUseCheck {
 public:
  void clear() { uses_.clear(); }
  // model_bad_input naming `request` for a block table too short for end_pos or an id outside
  // [0, cfg.n_blocks).
  Status add(int32_t request, std::span<const int32_t> block_table, int64_t first_pos, int64_t end_pos,
             const KvCacheConfig& cfg);
  // model_bad_input naming both requests (or the one, for a table repeating a written block).
  Status check_conflicts();

 private:
  struct Use {
    int32_t block_id;
    int32_t request;
    int32_t table_index;
    bool written;
  };
  std::vector<Use> uses_;
};

}  // namespace ds
