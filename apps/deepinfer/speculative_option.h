// --speculative-config on serve and generate (vLLM's JSON shape; docs/speculative.md), the
// spec_decode metrics of /metrics (vLLM's names) and the summary line the CLI prints at the end.
#pragma once

#include <string>

#include "engine/engine.h"
#include "http/metrics_registry.h"

namespace CLI {
class App;
}

namespace ds::cli {

void add_speculative_option(CLI::App* sub, std::string& json);

// Empty = speculation off; otherwise parse_speculative_config (its error names the flag and field).
Result<SpeculativeConfig> resolve_speculative_option(const std::string& json);

// vllm:spec_decode_num_drafts_total, ..._num_draft_tokens_total, ..._num_accepted_tokens_total,
// ..._num_accepted_tokens_per_pos_total{position}, and deepinfer:spec_decode_mean_acceptance_length.
// Registers nothing when the engine does not speculate. The engine must outlive the registry's use.
void add_spec_decode_metrics(server::MetricsRegistry& registry, const Engine& engine);

// "speculative decoding: N drafts, ... mean acceptance length X (per position: ...)" to stderr.
void print_spec_decode_summary(const char* cmd, const EngineStats& stats);

}  // namespace ds::cli
