// What a caller hands the engine (Request) and what comes back (TokenEvent). Engine-agnostic of
// HTTP: the server's recipe layer fills a Request; the offline batch path and examples do too.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/kv_layer_sink.h"
#include "grammar/compiled_grammar.h"
#include "sampling/logprobs.h"  // TokenLogprob {token_id, logprob}
#include "sampling/sampling_params.h"

namespace ds {

using RequestId = uint64_t;
using SteadyTime = std::chrono::steady_clock::time_point;

// Prefill/decode disaggregation (docs/pd.md): a sequence's unpaged model state (V4/V4.1: window
// rings, compressor partial groups) after its first n_tokens prompt tokens, exported by another
// engine of the same model (Request::export_state).
struct SequenceStateImport {
  int64_t n_tokens = 0;  // a multiple of the KV block size, < the prompt's length
  std::shared_ptr<const std::vector<std::byte>> bytes;
};

struct StopConditions {
  int32_t max_tokens = 256;               // generated tokens, >= 1
  std::vector<int32_t> stop_token_ids;    // besides the model's EOS (unless ignore_eos)
  std::vector<std::string> stop_strings;  // matched on detokenized text; excluded from the output
  bool ignore_eos = false;
};

struct Request {
  std::vector<int32_t> prompt_tokens;  // non-empty, ids < vocab
  SamplingParams sampling;
  StopConditions stop;
  int32_t priority = 0;                // higher runs first; equal priorities are FIFO
  std::optional<SteadyTime> deadline;  // past it the request is dropped and reported (deadline_exceeded)
  std::string cache_salt;              // prefix-cache scope: only requests with the same salt share blocks
  std::string tenant;                  // fair share between tenants (empty = the default tenant)
  std::string cache_class;  // KV tier traffic class (TTL per class, kvcache/tier_ttl.h); "" = default
  // Cache directives from the APIs (docs/kvcache.md, Cache control in the APIs):
  std::optional<int64_t> cache_ttl_s;  // tier TTL (and pin lease) instead of the class's; >= 1
  bool cache_tier_writes = true;       // false: the prompt's KV stays in the pool (never written below)
  // The prompt's full blocks go to the tiers as each prefill chunk completes them, not only once the
  // whole prompt is computed (a P/D prefill: the prefill server puts them while the rest computes).
  bool tier_write_chunks = false;
  // Told, during each forward, which of the prompt's blocks the forward completed, layer by layer as
  // the layers end (engine/kv_layer_sink.h; a P/D prefill copying pages while the rest computes).
  // Ignored by a model that cannot report layers (ModelRunner::set_kv_layer_done).
  std::shared_ptr<KvLayerSink> kv_layer_sink;
  // Keep the prompt's full blocks in the pool (a pin) for the TTL, within EngineConfig's pin quota;
  // beyond the quota the request runs unpinned (EngineStats::kv_pins_refused).
  bool cache_pin = false;
  std::string cache_key;   // OpenAI prompt_cache_key: groups requests for admin deletion by prefix
  bool detokenize = true;  // fill TokenEvent::text (stop strings need it)
  // Structured output: every sampled token is masked to what the grammar allows next (EOS only where
  // the grammar accepts); the request ends (stop) once the grammar is complete. Must be compiled
  // against this engine's tokenizer. Logprobs then describe the masked distribution (docs/grammar.md).
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  // Thinking mode: the grammar applies only after this token (e.g. `</think>`) has been sampled;
  // -1 = from the first token.
  int32_t grammar_after_token = -1;
  // P/D. export_state: the event with the first token carries the model's sequence state after the
  // prompt (TokenEvent::sequence_state; empty for a model that keeps none, V3). state_import: when
  // the prefix cache holds the prompt's first n_tokens tokens (the blocks that came with the state),
  // the sequence continues from the imported state there — exactly as the exporting engine would
  // have — instead of by SWA bounded replay; otherwise (blocks evicted, preempted) it is ignored.
  bool export_state = false;
  std::optional<SequenceStateImport> state_import;
};

enum class FinishReason : uint8_t {
  none,       // not finished
  stop,       // EOS, a stop token id or a stop string
  length,     // max_tokens reached (or the model's max sequence length)
  cancelled,  // cancel() or the client went away
  deadline,   // the deadline passed (queued or running)
  error,      // see TokenEvent::error
};
const char* finish_reason_name(FinishReason reason);

struct TokenUsage {
  int64_t prompt_tokens = 0;
  // Prompt tokens served from the prefix cache (DeepSeek: prompt_cache_hit_tokens).
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

// One event per request per step that produced something, and a final one (finished == true).
struct TokenEvent {
  RequestId request_id = 0;
  std::vector<int32_t> tokens;  // tokens generated since the last event (stop tokens excluded)
  std::string text;             // their text, UTF-8 safe, stop strings held back / removed
  // Per token in `tokens` when the request asked for logprobs: chosen token's logprob + top-N.
  std::vector<TokenLogprob> chosen_logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  bool finished = false;
  FinishReason finish_reason = FinishReason::none;
  Status error;      // set when finish_reason is error or deadline (engine_deadline_exceeded)
  TokenUsage usage;  // so far (prompt and cached counts are final from the first event)
  // Request::export_state, on the event with the first token: the state after the prompt.
  std::shared_ptr<const std::vector<std::byte>> sequence_state;
  // Timing for metrics (steady clock): when the request was queued, first scheduled, first token out.
  SteadyTime queued_at{};
  SteadyTime first_scheduled_at{};
  SteadyTime first_token_at{};
};

}  // namespace ds
