// The interface the engine drives: one forward pass over chunks of several sequences at once
// (rows concatenated for the GEMMs, attention per sequence), plus the MTP head's forward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/draft_block_model.h"
#include "model/kv_cache.h"
#include "model/routed_expert_set.h"
#include "tensor/tensor.h"
#include "weights/model_config.h"

namespace ds {

// One sequence's next chunk: `tokens` go to positions seq->n_tokens, seq->n_tokens + 1, ... whose
// rows are written into the blocks seq->block_table names; on success seq->n_tokens advances.
struct ForwardRequest {
  SequenceState* seq = nullptr;
  std::span<const int32_t> tokens;
  bool all_logits = false;  // logits for every token of the chunk, else only for the last
  // SWA bounded replay (models whose KvCacheLayout::swa_replay_tokens W > 0; deepinfer-features.md
  // §6.1): positions below replay_end belong to a cached prefix of replay_end tokens whose blocks
  // are shared. The first replay chunk starts at replay_end - W on a fresh state slot; replayed rows
  // rebuild the window ring and compressor groups (window attention cut at the replay start) and
  // read the cached compressed entries, which are never recomputed into the pages or rewritten.
  // 0 = no replay (every row is new).
  int64_t replay_end = 0;
  // LogitsOutput::hidden for every token of the chunk, else only for the rows that get logits.
  // Speculative decoding sets it so the MTP drafter can consume every position (docs/speculative.md).
  bool all_hidden = false;
  // Speculative decoding (docs/speculative.md): after this forward the caller may lower
  // seq->n_tokens to any position inside the chunk (its rejected drafts), and the sequence's next
  // forward starts there. A model with unpaged per-sequence state journals the chunk to allow it
  // (V4: model/v4_chunk_undo.h); a paged-only model (V3) needs nothing. Not with replay_end.
  bool may_truncate = false;
};

// One sequence's MTP chunk: row i pairs the main model's hidden state at position
// seq->n_mtp_tokens + i with the token that followed it (numerics.md, MTP). The MTP layer has its
// own slot in the same blocks; on success seq->n_mtp_tokens advances.
struct MtpRequest {
  SequenceState* seq = nullptr;
  std::span<const int32_t> next_tokens;  // [n]
  const float* hidden = nullptr;         // [n, hidden_size], from LogitsOutput::hidden
  // false: logits (and LogitsOutput::hidden) only for the last row.
  bool all_logits = true;
  // Drafting (docs/speculative.md): rows may run past the main model's n_tokens (the MTP layer fed
  // its own output autoregressively). The caller lowers n_mtp_tokens back afterwards; the rows it
  // wrote are overwritten before anything reads them as context of a real position.
  bool draft = false;
  // Logits over the draft vocabulary only (set_mtp_draft_vocab): LogitsOutput::logits is then
  // [rows, ids.size()], column c holding token ids[c]. A cheaper head for drafting; every request
  // of one call must agree.
  bool draft_vocab = false;
};

struct LogitsOutput {
  TensorF32 logits;  // [n_out_rows, vocab]
  // [n_hidden_rows, hidden_size]: forward() gives the drafter's input for the rows that get logits, or
  // for every row of a request with all_hidden: V3's MTP input (after the final norm by default;
  // ModelOptions::mtp_input), V4's final normed rows, V4.1 DSpark's context features when a request
  // asks all_hidden (draft_block_model()).
  // forward_mtp() gives the MTP layer's own output for its logits rows, in the same convention: the
  // input of the next MTP step when the layer is reused autoregressively for drafting.
  TensorF32 hidden;
  // Request r owns output rows [row_begin[r], row_begin[r + 1]) (size n_requests + 1).
  std::vector<int64_t> row_begin;
  // Request r owns hidden rows [hidden_row_begin[r], hidden_row_begin[r + 1]); equal to row_begin
  // unless a request asked for all_hidden. Filled by forward() (V3, V4); may be empty from forward_mtp.
  std::vector<int64_t> hidden_row_begin;
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  virtual const ModelConfig& config() const = 0;

  // The paged KV cache (model/kv_cache.h). The engine sizes it from kv_cache_layout() and its
  // memory budget, then calls init_kv_cache once; standalone users call
  // init_kv_cache(standalone_kv_cache_config(max_seq_len)) and run make_standalone_sequence().
  virtual KvCacheLayout kv_cache_layout() const = 0;
  // Allocates the storage: per layer (+ MTP) [n_blocks, block_size, kv_lora_rank + qk_rope] f32.
  // Calling it again resizes and forgets every cached row. invalid_argument for a bad block size,
  // zero blocks, or more bytes than this machine's memory; nothing changes on error.
  virtual Status init_kv_cache(const KvCacheConfig& cfg) = 0;
  // n_blocks is 0 until init_kv_cache succeeds.
  virtual const KvCacheConfig& kv_cache_config() const = 0;

  // Runs every request's chunk in one pass, writes the chunks' rows into their blocks and
  // advances their n_tokens. Validates all requests first and then changes nothing on error:
  // model_bad_input naming the request for an empty chunk, a token id out of range, a sequence
  // over max_seq_len or named twice, a block table too short for n_tokens + chunk or with an id
  // outside [0, n_blocks), or a block written by one request and used by another in the call.
  // Not re-entrant: one forward at a time per model (scratch buffers are reused).
  virtual Status forward(std::span<const ForwardRequest> requests, LogitsOutput& out) = 0;

  // Expert parallelism (docs/expert-parallel.md): a step with no rows of this rank's own, in which
  // every MoE layer of the main model still takes part in its exchange (serving the rows other
  // ranks send to this rank's experts). Ranks call forward or forward_idle in lockstep.
  virtual Status forward_idle() {
    return Status(ErrorCode::model_unsupported, "this model cannot run an idle expert-parallel step");
  }
  // The same for the MTP layer: its MoE takes part in the exchange of ranks running forward_mtp.
  virtual Status forward_mtp_idle() {
    return Status(ErrorCode::model_unsupported, "this model cannot run an idle expert-parallel MTP step");
  }

  // KV tiers (src/kvcache/tier_store.h): one block's bytes across every paged cache kind and layer
  // the engine uses (V3: MLA latents; V4: compressed entries and indexer keys; the MTP layer's only
  // with KvCacheConfig::mtp_layer), in a fixed order. kv_block_bytes() is 0 before init_kv_cache
  // or for a model that cannot export. kv_layout_tag() names the layout and dtype of those bytes
  // (part of the tier key). Export/import may run on another thread during a forward that neither
  // writes (export) nor touches (import) the block. model_bad_input for a block id out of range or
  // a buffer of the wrong size.
  virtual int64_t kv_block_bytes() const { return 0; }
  virtual std::string kv_layout_tag() const { return {}; }
  virtual Status export_kv_block(int32_t /*block_id*/, std::span<std::byte> /*out*/) const {
    return Status(ErrorCode::model_unsupported, "this model cannot export KV blocks");
  }
  virtual Status import_kv_block(int32_t /*block_id*/, std::span<const std::byte> /*in*/) {
    return Status(ErrorCode::model_unsupported, "this model cannot import KV blocks");
  }
  // The paged KV storage itself, for writers outside the engine (P/D: a prefill server puts a
  // prompt's blocks straight into the decode server's pool, docs/pd.md): per page array, in
  // export_kv_block's order, the address of block 0 and the bytes of one block. Block b of array a
  // is at base + b·block_bytes, and export_kv_block(b) is the arrays' pages of block b in turn.
  // Empty before init_kv_cache or for a model that cannot export; the memory stays where it is
  // until the next init_kv_cache.
  virtual std::vector<KvPageArray> kv_page_arrays() { return {}; }
  // Layer by layer (P/D, docs/pd.md): during every later forward(), after each main decoder layer,
  // `done(layer)` once that layer has written the forward's rows into its page arrays (those whose
  // KvPageArray::layer it is), so a writer outside the engine can copy them while the next layers
  // run. On the forward's thread; it must not call into the model. Null clears it. false: this
  // model cannot tell (nothing is kept).
  using KvLayerDone = std::function<void(int layer)>;
  virtual bool set_kv_layer_done(KvLayerDone /*done*/) { return false; }

  // P/D (docs/pd.md): a sequence's unpaged state after its last forward — V4/V4.1: window rings,
  // compressor partial groups, entry counts (model/v4_state_codec.h); empty for a model whose state
  // is all in the paged blocks (V3) — and its import into another sequence's state slot at
  // seq.n_tokens, which must be the exported position. Given the same paged blocks the next
  // forward then continues exactly as the exporting sequence would have (no SWA replay).
  // model_bad_input for a state of another model or position, or a slot out of range.
  // The most bytes export_sequence_state gives for this model (0: it keeps no state).
  virtual int64_t sequence_state_bytes() const { return 0; }
  virtual Result<std::vector<std::byte>> export_sequence_state(const SequenceState& /*seq*/) const {
    return std::vector<std::byte>{};
  }
  virtual Status import_sequence_state(SequenceState& /*seq*/, std::span<const std::byte> state) {
    return check_sequence_state(state, 0);
  }
  // Whether import_sequence_state would take `state` at n_tokens (its shapes and position); changes
  // nothing, safe beside a running forward.
  virtual Status check_sequence_state(std::span<const std::byte> state, int64_t /*n_tokens*/) const {
    return state.empty() ? ok_status()
                         : Status(ErrorCode::model_bad_input, "this model keeps no sequence state to import");
  }

  // Live EPLB (docs/expert-parallel.md): the main model's MoE layers, ascending (the MTP layer's
  // MoE holds every expert and is not listed). Empty for a model whose experts cannot move.
  virtual std::vector<RoutedExpertSet*> routed_expert_sets() { return {}; }

  // The checkpoint's block drafter (V4.1 DSpark stages), or null. With one, a forward() in which
  // some request asks all_hidden gives its context features as LogitsOutput::hidden (docs/dspark.md).
  virtual DraftBlockModel* draft_block_model() { return nullptr; }

  virtual bool has_mtp() const = 0;
  // True when the engine can draft with the MTP layer (docs/speculative.md): forward() honours
  // all_hidden and fills hidden_row_begin, forward_mtp() honours draft rows and all_logits = false,
  // and rolling a sequence back is lowering its counts (all state paged). V3; V4 needs its window
  // rings and compressor groups rolled back first.
  virtual bool supports_mtp_drafting() const { return false; }
  // True when ForwardRequest::may_truncate is honoured: a sequence can be rolled back inside the
  // chunk of its last such forward (V3: every forward, its state is all paged; V4, V4.1).
  virtual bool supports_truncation() const { return false; }
  // MTP logits for every row of every request (model_unsupported without an MTP layer); the same
  // validation as forward, plus: MTP rows only for positions the main model has consumed.
  virtual Status forward_mtp(std::span<const MtpRequest> requests, LogitsOutput& out) = 0;
  // Speculative decoding: the token ids (distinct, in [0, vocab)) MtpRequest::draft_vocab rows get
  // logits for — the MTP head restricted to them costs ids.size() / vocab of the full one (FR-Spec,
  // Zhao et al. 2025). Empty: back to the full head. model_unsupported where not built.
  virtual Status set_mtp_draft_vocab(std::span<const int32_t> /*ids*/) {
    return Status(ErrorCode::model_unsupported, "this model has no draft vocabulary head");
  }
};

}  // namespace ds
