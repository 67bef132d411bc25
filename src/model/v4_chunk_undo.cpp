#include "model/v4_chunk_undo.h"

#include <algorithm>

namespace ds {

namespace {

void set_journal(V4LayerState& st, bool on) {
  st.journal = on;
  st.comp.journal = on;
  st.idx_comp.journal = on;
}

// Restores a compressor to just before its first completion at a position >= m; returns how
// many completions (entries written) were at positions >= m.
int64_t undo_compressor(V4CompressorState& c, int64_t m) {
  const V4CompressorUndo& u = c.undo;
  const auto first =
      std::find_if(u.completion_pos.begin(), u.completion_pos.end(), [m](int64_t p) { return p >= m; });
  if (first == u.completion_pos.end()) return 0;
  const size_t i = static_cast<size_t>(first - u.completion_pos.begin());
  c.kv = u.kv_before[i];
  c.score = u.score_before[i];
  return static_cast<int64_t>(u.completion_pos.size() - i);
}

void undo_ring(V4LayerState& st, int64_t m) {
  const V4RingUndo& u = st.ring_undo;
  const int64_t D = st.head_dim;
  for (size_t i = u.pos.size(); i-- > 0;) {  // newest first: a slot written twice gets its oldest value
    if (u.pos[i] < m) continue;
    const int64_t slot = u.pos[i] % st.window;
    st.ring_pos[static_cast<size_t>(slot)] = u.old_pos[i];
    std::copy_n(u.old_kv.data() + static_cast<int64_t>(i) * D, D, st.ring_kv.data() + slot * D);
  }
}

}  // namespace

void begin_chunk_journal(V4SequenceSlot& slot, int64_t begin, std::span<const int32_t> tokens) {
  for (V4LayerState& st : slot.layers) {
    st.ring_undo.clear();
    st.comp.undo.clear();
    st.idx_comp.undo.clear();
    set_journal(st, true);
  }
  slot.undo_begin = begin;
  slot.undo_end = begin + static_cast<int64_t>(tokens.size());
  slot.engram_before = slot.engram_history;
  slot.undo_tokens.assign(tokens.begin(), tokens.end());
}

void end_chunk_journal(V4SequenceSlot& slot) {
  for (V4LayerState& st : slot.layers) set_journal(st, false);
}

void drop_chunk_journal(V4SequenceSlot& slot) {
  end_chunk_journal(slot);
  slot.undo_begin = slot.undo_end = -1;
}

bool can_roll_back(const V4SequenceSlot& slot, int64_t m) {
  return slot.undo_begin >= 0 && slot.undo_end == slot.n_tokens && m >= slot.undo_begin &&
         m < slot.n_tokens && m >= slot.n_mtp_tokens;
}

void roll_back(V4SequenceSlot& slot, int64_t m, std::span<const LayerSpec> specs, int64_t engram_keep,
               int64_t stream_row) {
  for (size_t l = 0; l < slot.layers.size(); ++l) {
    V4LayerState& st = slot.layers[l];
    undo_ring(st, m);
    const int64_t main = st.comp.ratio > 0 ? undo_compressor(st.comp, m) : 0;
    const int64_t keys = st.idx_comp.ratio > 0 ? undo_compressor(st.idx_comp, m) : 0;
    st.n_entries -= main;
    if (st.idx_comp.ratio > 0) {
      st.n_idx_keys -= keys;  // V4 CSA: the indexer's own compressor
    } else if (specs[l].owns_index_keys()) {
      st.n_idx_keys -= main;  // V4.1 KV sources: one key per compressed entry
    }
  }
  if (engram_keep > 0 || !slot.engram_before.empty()) {
    std::vector<int32_t> h = slot.engram_before;
    h.insert(h.end(), slot.undo_tokens.begin(), slot.undo_tokens.begin() + (m - slot.undo_begin));
    if (static_cast<int64_t>(h.size()) > engram_keep) h.erase(h.begin(), h.end() - engram_keep);
    slot.engram_history = std::move(h);
  }
  const int64_t pending = m - slot.n_mtp_tokens;  // MTP inputs of positions [n_mtp_tokens, m)
  if (!slot.pending_streams.empty()) slot.pending_streams.resize(static_cast<size_t>(pending * stream_row));
  slot.n_tokens = m;
  drop_chunk_journal(slot);  // once: the journal's counts now describe another state
}

void begin_mtp_draft(V4SequenceSlot& slot, int64_t pos) {
  V4LayerState& st = slot.mtp_layers.front();
  if (slot.mtp_draft_begin < 0) {
    st.ring_undo.clear();
    slot.mtp_draft_begin = pos;
  }
  st.journal = true;  // the MTP layer is window-only: no compressor to journal
}

void end_mtp_draft(V4SequenceSlot& slot) { slot.mtp_layers.front().journal = false; }

void undo_mtp_drafts(V4SequenceSlot& slot) {
  if (slot.mtp_draft_begin < 0) return;
  V4LayerState& st = slot.mtp_layers.front();
  undo_ring(st, slot.mtp_draft_begin);
  st.ring_undo.clear();
  slot.mtp_draft_begin = -1;
}

}  // namespace ds
