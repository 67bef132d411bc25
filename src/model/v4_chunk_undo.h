// Rolling a V4 / V4.1 sequence back inside its last chunk: speculative decoding verifies
// [token, draft_1 .. draft_k] in one forward and keeps a prefix (docs/speculative.md). Paged state
// (compressed entries, index keys) is position-addressed and only its counts move back; the unpaged
// state of the slot (window rings, compressor partial groups, Engram history, MTP inputs) is
// journaled while a chunk with ForwardRequest::may_truncate runs, and restored from the journal:
//   rings        the old contents of every slot a rejected row overwrote, put back;
//   compressors  the state just before the first group completion at a rejected position (the rows
//                of rejected positions it still holds are rewritten before that group completes
//                again), and the entries (and index keys) of completions at rejected positions
//                uncounted;
//   Engram       the history before the chunk plus its kept tokens.
// The result is the state a run that never saw the rejected rows has, bit for bit (tested in
// v4_model_test / v41_model_test "Truncate").
#pragma once

#include <cstdint>
#include <span>

#include "model/v4_kv_state.h"
#include "weights/layer_spec.h"

namespace ds {

// Starts journaling the chunk `tokens` at positions [begin, begin + n) in every main layer's state.
void begin_chunk_journal(V4SequenceSlot& slot, int64_t begin, std::span<const int32_t> tokens);
// Stops recording after the chunk's forward; the slot may now roll back to any m in [begin, end).
void end_chunk_journal(V4SequenceSlot& slot);
// Forgets the journal (the slot ran a chunk without may_truncate).
void drop_chunk_journal(V4SequenceSlot& slot);
// Whether the slot (holding slot.n_tokens positions) can be rolled back to m < slot.n_tokens.
bool can_roll_back(const V4SequenceSlot& slot, int64_t m);
// Rolls the slot back to m tokens (precondition: can_roll_back). specs: the main layers' roles
// (which layers count index keys per compressed entry); engram_keep: the history length Engram
// keeps (max_ngram_size − 1, 0 without Engram); stream_row: floats per pending MTP stream row.
// The journal is dropped: the next roll-back needs another journaled chunk.
void roll_back(V4SequenceSlot& slot, int64_t m, std::span<const LayerSpec> specs, int64_t engram_keep,
               int64_t stream_row);

// MTP draft rows (MtpRequest::draft) write the MTP layer's ring past the positions it consumed:
// begin_mtp_draft journals those writes (the first call of a chain records its position),
// end_mtp_draft stops recording after the row, undo_mtp_drafts puts back every slot the chain
// overwrote and forgets the chain.
void begin_mtp_draft(V4SequenceSlot& slot, int64_t pos);
void end_mtp_draft(V4SequenceSlot& slot);
void undo_mtp_drafts(V4SequenceSlot& slot);

}  // namespace ds
