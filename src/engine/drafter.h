// Drafter: the seam between the engine's speculative decoding and whatever proposes draft tokens
// (docs/speculative.md). The engine calls it on the thread that runs the step, around the target
// forward of that step:
//
//   propose(chunks, other_rows)
//                    before the forward: fill each decode chunk's draft slots (k at most; fewer, or
//                    none, is fine — the engine verifies what was filled); other_rows is what the
//                    step's target forward runs besides these chunks' token and draft rows (the
//                    prefill chunks and the decode rows of sequences that do not draft), so a
//                    drafter that sizes its drafts by the step's cost (DSpark's confidence
//                    scheduling) counts them;
//   target forward   over [token, draft_1 .. draft_n] for those chunks, every row's logits;
//   verify           the engine samples each row with the request's own keyed draw and keeps the
//                    longest prefix of drafts equal to those samples (lossless by construction);
//   observe(chunks)  after the verify: every chunk's kept positions, the target's hidden rows for
//                    them and the token that follows each, so the drafter can extend its own state
//                    (the MTP layer's cache rows) exactly as far as the target's.
//
// A drafter keeps per-sequence state keyed by SeqId; it must notice on its own when a sequence
// restarted below its state (preemption, a prefix hit) from DraftChunk/ObservedChunk::pos_begin, and
// forget() is called when a sequence leaves the engine. Rollback of the *target's* paged KV is the
// engine's (block tables, counts); a drafter with its own unpaged state (V4's MTP window ring, DSpark's
// heads) rolls that back itself in observe().
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "grammar/grammar_matcher.h"
#include "kvcache/kv_cache_manager.h"
#include "model/kv_cache.h"
#include "sampling/sampling_params.h"

namespace ds {

struct DraftChunk {
  SeqId seq_id = 0;
  // The step's copy of the sequence: block table covering pos_begin + 1 + draft.size() positions,
  // n_tokens = pos_begin (the target has not run yet). The drafter may use n_mtp_tokens and must
  // leave n_tokens alone.
  SequenceState* seq = nullptr;
  int64_t pos_begin = 0;             // position of the chunk's (known) token
  std::span<const int32_t> context;  // the sequence's tokens [0, pos_begin] (prompt + generated)
  std::span<int32_t> draft;          // slots to fill: draft[j] is the guess for position pos_begin + 1 + j
  int32_t n_filled = 0;              // set by propose(): draft[0, n_filled) are proposals
  // Sampled drafts (SpeculativeConfig::draft_sampling = sampled, a request with temperature > 0;
  // null: greedy drafts). The drafter draws draft[j] from its distribution q_j — its logits
  // processed by these params as Sampler::distribution does — with the keyed draw
  // philox_uniform(sampling->seed, position + j, kDraftDrawSlot), and writes q_j to
  // draft_probs[j * vocab, (j + 1) * vocab) (vocab = draft_probs.size() / draft.size()); the engine
  // verifies with the rejection rule of rejection_sampling.h. A drafter that cannot sample leaves
  // n_filled = 0.
  const SamplingParams* sampling = nullptr;
  uint64_t position = 0;  // the output index (RNG counter) of draft[0]
  std::span<float> draft_probs;
  // Structured output (null: unconstrained): the request's matcher, at the state after the chunk's
  // token. A drafter may keep its drafts inside the grammar — draft[j] among the tokens the matcher
  // allows once it accepted draft[0, j) — and must roll the matcher back to where it was before
  // propose() returns. Drafts outside it are only rejected by the verify.
  grammar::GrammarMatcher* matcher = nullptr;
};

struct ObservedChunk {
  SeqId seq_id = 0;
  SequenceState* seq = nullptr;  // the step's copy (n_tokens includes rejected positions)
  int64_t pos_begin = 0;
  // Positions [pos_begin, pos_begin + n_kept) are final in the target's cache; 0 = the chunk failed
  // (the drafter drops the sequence's state).
  int32_t n_kept = 0;
  std::span<const int32_t> next_tokens;  // [n_kept]: the token at position p + 1 for each kept p
  const float* hidden = nullptr;         // [n_kept, hidden_size]: the target's hidden rows (MTP input)
  bool wants_draft = false;              // the sequence will draft in its next decode chunk
  bool sampled_draft = false;            // ... and its drafts are sampled (DraftChunk::sampling)
  bool constrained_draft = false;  // ... and under a grammar (DraftChunk::matcher, now or once it starts)
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Whether the target forward must return every row's hidden state (LogitsOutput::hidden).
  virtual bool needs_hidden() const = 0;
  virtual Status propose(std::span<DraftChunk> chunks, int64_t other_rows) = 0;
  virtual Status observe(std::span<const ObservedChunk> chunks) = 0;
  virtual void forget(SeqId seq_id) = 0;
};

}  // namespace ds
