// Offline batch inference: `deepinfer generate --input prompts.jsonl --output out.jsonl`.
// Every input line becomes one Engine request; they run with continuous batching, and the output
// has one line per input line, in input order, written as soon as every earlier line is done.
//
// Input line (JSON object), one of:
//   {"prompt": "text"}                      BOS (when the tokenizer adds it) + text, special tokens parsed
//   {"messages": [{"role": "system"|"user"|"assistant", "content": "..."}]}   DeepSeek-V3 chat format
//   {"prompt_token_ids": [1, 2, 3]}
// plus optional "id" (any JSON value, echoed) and per-line sampling fields: max_tokens, temperature,
// seed, top_k, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty, stop (string
// or list), stop_token_ids, ignore_eos, logprobs (bool), top_logprobs.
// Output line: {"index", "id", "text", "token_ids", "finish_reason", "usage": {"prompt_tokens",
// "completion_tokens", "cached_prompt_tokens"}} (+ "logprobs" when asked), or {"index", "id",
// "error": {"code", "message"}} for a line that could not run. A bad line does not stop the batch.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/engine.h"
#include "model/decoder_replay.h"
#include "tokenizer/tokenizer.h"

namespace ds::cli {

// Values for lines that do not set them.
struct BatchDefaults {
  int32_t max_tokens = 64;
  float temperature = 0.0f;
  uint64_t seed = 0;
};

struct BatchItem {
  int64_t index = 0;    // 0-based position among the non-blank input lines
  std::string id_json;  // the line's "id" as JSON text, or the index
  Request request;
  Status error;  // the line could not be parsed or encoded; it is reported, not run
};

// Parses and tokenizes every non-blank line. A bad line gives an item with `error` set; only a
// read failure is an error of the whole call (io_error).
Result<std::vector<BatchItem>> parse_batch_input(std::istream& in, const Tokenizer& tok,
                                                 const BatchDefaults& defaults);

struct BatchSummary {
  int64_t n_requests = 0;
  int64_t n_failed = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_prompt_tokens = 0;
  int64_t completion_tokens = 0;
  double wall_s = 0.0;
};

// Runs the items through `engine` (waiting and retrying when it is overloaded) and writes one JSON
// line per item to `out` in input order. `progress`: a progress bar on stderr.
BatchSummary run_batch(Engine& engine, std::vector<BatchItem>& items, std::ostream& out, bool progress);

struct OfflineBatchOptions {
  std::string model_dir;
  std::string input_path;
  std::string output_path;
  BatchDefaults defaults;
  std::string isa = "auto";
  int threads = 0;
  std::string numerics;  // --numerics (ModelOptions::numerics)
  int32_t max_running = 64;
  int32_t max_step_tokens = 2048;
  int64_t kv_cache_mib = 2048;
  bool progress = true;
  SpeculativeConfig speculative;        // --speculative-config (off by default)
  DecoderReplayOptions decoder_replay;  // --yoco-prefill-* (ModelOptions::decoder_replay)
};

// Loads the tokenizer and model, runs the batch, prints the throughput summary to stderr.
// Returns the process exit code: 0 (even when some lines failed: they are in the output), 1 on a
// runtime error (unreadable input, model load), 2 on a usage error.
int run_offline_batch(const OfflineBatchOptions& options);

}  // namespace ds::cli
