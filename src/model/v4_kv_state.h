// Per-sequence state of the DeepSeek-V4 forward (model-spec §4.11), kept unpaged in a pool of
// slots the model owns (SequenceState::state_slot names one): per layer the sliding-window ring,
// the compressors' partial groups, the compressed entries and the indexer keys; for the MTP
// layer the same; plus the main model's final stream states the MTP layer has not consumed yet.
//
// Compressed entries and indexer keys grow with the sequence (one entry per `ratio` tokens): they
// are paged (V4EntryPages), in the sequence's KV blocks: a block of block_size tokens holds
// block_size / ratio entries of each compressed layer.
#pragma once

#include <cstdint>
#include <vector>

#include "model/kv_cache.h"

namespace ds {

// What one journaled chunk (ForwardRequest::may_truncate, model/v4_chunk_undo.h) did to a
// compressor: the positions whose row completed a group, and the state just before each completion.
struct V4CompressorUndo {
  std::vector<int64_t> completion_pos;
  std::vector<std::vector<float>> kv_before, score_before;
  void clear() {
    completion_pos.clear();
    kv_before.clear();
    score_before.clear();
  }
};

// ... and to a window ring: per row written (chunk order) its position and what its slot held.
struct V4RingUndo {
  std::vector<int64_t> pos, old_pos;
  std::vector<float> old_kv;  // [rows, head_dim]
  void clear() {
    pos.clear();
    old_pos.clear();
    old_kv.clear();
  }
};

// The unfinished group(s) of one compressor ([rows, coff·d_c], rows = 2·ratio with overlap). With
// overlap rows [0, ratio) are the previous complete group and rows [ratio, 2·ratio) the current
// one; scores start at -inf so a missing previous group drops out of the softmax.
struct V4CompressorState {
  int32_t ratio = 0;
  bool overlap = false;
  int64_t width = 0;         // coff · d_c
  std::vector<float> kv;     // [rows, width]
  std::vector<float> score;  // [rows, width]
  bool journal = false;      // record completions in `undo` (a journaled chunk is running)
  V4CompressorUndo undo;

  void reset(int32_t ratio_tokens, int64_t width_channels, bool with_overlap);
  int64_t rows() const { return overlap ? 2 * int64_t{ratio} : ratio; }
};

struct V4LayerState {
  int32_t window = 0;
  int64_t head_dim = 0;
  std::vector<float> ring_kv;     // [window, head_dim]: slot p mod window holds position p's KV
  std::vector<int64_t> ring_pos;  // [window], -1 = empty
  V4CompressorState comp;         // main compressor (ratio > 0)
  int64_t n_entries = 0;          // compressed entries written to the pages (entry j pools j·ratio ..)
  V4CompressorState idx_comp;     // indexer compressor (CSA only)
  int64_t n_idx_keys = 0;         // indexer keys written to the pages
  bool journal = false;           // record ring writes in `ring_undo` (a journaled chunk is running)
  V4RingUndo ring_undo;

  // comp: a compressor of `ratio` (0: none) over (overlap ? 2 : 1)·head_dim channels; idx_comp:
  // V4's overlapping indexer compressor over 2·index_dim channels when index_compressor.
  void reset(int32_t window_tokens, int64_t head_dim_channels, int32_t ratio, bool overlap,
             bool index_compressor, int64_t index_dim);
};

// One compressed kind of one layer in the paged storage: entry j of a sequence (positions
// j·ratio .. j·ratio + ratio - 1) is row j mod (bs / ratio) of block block_table[j·ratio / bs].
struct V4EntryPages {
  LatentLayerView view;  // [n_blocks, block_size / ratio, row_dim]
  int32_t ratio = 0;
  const int32_t* block_table = nullptr;  // validated to cover the entries touched

  bool empty() const { return view.blocks == nullptr; }
  // Row of entry j in view.blocks taken as one [n_blocks · block_size, row_dim] array: readers
  // index the entries where they lie instead of copying them out.
  int64_t row_of(int64_t j) const {
    return int64_t{block_table[j / view.block_size]} * view.block_size + j % view.block_size;
  }
  // entries [first, first + n) = src [n, row_dim]
  void write(int64_t first, int64_t n, const float* src) const;
};

struct V4LayerPages {
  V4EntryPages comp;  // main compressed KV (ratio > 0)
  V4EntryPages idx;   // indexer keys (CSA)
};

// V4.1, one sequence in one step (model-spec §5.3, §5.6): the latest index source's top-k for
// each of the chunk's rows, which the layers after it reuse, and the candidate source's pool
// (per row, the kept blocks of candidate_block_size entries, ascending).
struct V41StepSelection {
  std::vector<std::vector<int32_t>> topk;
  std::vector<std::vector<int32_t>> pool_blocks;
};

// One sequence's rows [first_row, first_row + n) of a step's rows, with its state and pages for
// the layer being run.
struct V4SequenceRows {
  int64_t first_row = 0;
  int64_t n = 0;
  V4LayerState* state = nullptr;
  V4LayerPages pages;  // V4.1 readers: the KV source's compressed entries and index keys
  // V4.1: the KV source layer's state (its entry and index-key counts; null = `state` itself)
  // and the step's shared selection.
  const V4LayerState* source = nullptr;
  V41StepSelection* shared = nullptr;
  // V4.1 decoder replay: the layer's compressor has consumed this chunk already (all its rows,
  // V4Attention::feed_compressor); these rows only attend.
  bool compressor_fed = false;
  // V4.1 release index-key publishing (V4Numerics::index_keys_on_group): the layer whose keys
  // pages.idx holds and whose n_idx_keys counts them (null: the KV source's, as ever).
  const V4LayerState* keys_owner = nullptr;
  // DSpark draft block (docs/dspark.md): every row sees every ring entry and every row of the chunk
  // (no causal mask, no per-row window), and the chunk's KV does not enter the ring.
  bool draft_block = false;
};

struct V4SequenceSlot {
  int64_t n_tokens = 0;  // main-model positions this slot's state has consumed
  // MTP positions consumed, or skipped: the MTP layer may start past positions it never ran
  // (drafting was off for them; their ring entries are missing, which only lowers acceptance).
  int64_t n_mtp_tokens = 0;
  std::vector<V4LayerState> layers;
  std::vector<V4LayerState> mtp_layers;
  // Final stream states [hc, hidden] of positions [n_mtp_tokens, n_tokens): the MTP input. Steps
  // the engine runs without the drafter (the policy's k = 0) leave rows here until its next
  // observe skips them (at most the policy's probe interval, docs/speculative.md).
  std::vector<float> pending_streams;
  // MTP drafting (MtpRequest::draft): the output streams [hc, hidden] of the MTP row at position
  // mtp_out_pos (the last MTP row run, -1: none), the input of a draft row at mtp_out_pos + 1; and
  // the first position of the current chain of draft rows (-1: none), whose ring writes are
  // journaled in mtp_layers' ring_undo and undone by the next MTP call that is not a draft.
  std::vector<float> mtp_out_streams;
  int64_t mtp_out_pos = -1;
  int64_t mtp_draft_begin = -1;
  // V4.1 Engram: the last max_ngram_size − 1 token ids (oldest first) the n-grams reach back to.
  std::vector<int32_t> engram_history;
  // V4.1 release index-key publishing: the KV source whose keys are published (-1: none yet).
  int published_index_keys = -1;
  // The last forward's chunk when it was journaled (ForwardRequest::may_truncate): positions
  // [undo_begin, undo_end); the next forward may start anywhere in it. -1: nothing to roll back.
  int64_t undo_begin = -1, undo_end = -1;
  std::vector<int32_t> engram_before;  // engram_history before that chunk
  std::vector<int32_t> undo_tokens;    // that chunk's tokens
  // V4.1 DSpark (docs/dspark.md): each stage's ring of context keys, holding positions below
  // n_dspark_tokens (empty until the first context rows arrive).
  std::vector<V4LayerState> dspark_layers;
  int64_t n_dspark_tokens = 0;
  bool in_use = false;
};

}  // namespace ds
