#include "speculative_option.h"

#include <CLI/CLI.hpp>

#include <cstdio>

namespace ds::cli {

void add_speculative_option(CLI::App* sub, std::string& json) {
  sub->add_option("--speculative-config", json,
                  "Speculative decoding, as vLLM: '{\"method\": \"mtp\", \"num_speculative_tokens\": 3}' "
                  "(the checkpoint's MTP layer drafts k tokens, verified in one forward; lossless)");
}

Result<SpeculativeConfig> resolve_speculative_option(const std::string& json) {
  if (json.empty()) return SpeculativeConfig{};
  return parse_speculative_config(json);
}

namespace {

double mean_acceptance_length(const EngineStats& s) {
  return s.spec_decode_num_drafts > 0 ? 1.0 + static_cast<double>(s.spec_decode_num_accepted_tokens) /
                                                  static_cast<double>(s.spec_decode_num_drafts)
                                      : 0.0;
}

}  // namespace

void add_spec_decode_metrics(server::MetricsRegistry& registry, const Engine& engine) {
  if (!engine.config().speculative.enabled()) return;
  using server::Counter;
  using server::Gauge;
  Counter* drafts =
      &registry.counter("vllm:spec_decode_num_drafts_total", "Decode steps that verified drafts.");
  Counter* draft_tokens = &registry.counter("vllm:spec_decode_num_draft_tokens_total",
                                            "Draft tokens verified by the target model.");
  Counter* accepted = &registry.counter("vllm:spec_decode_num_accepted_tokens_total",
                                        "Draft tokens the target model accepted.");
  auto* per_pos =
      &registry.counter_family("vllm:spec_decode_num_accepted_tokens_per_pos_total",
                               "Accepted draft tokens by draft position (0 = first).", {"position"});
  Gauge* mean = &registry.gauge("deepinfer:spec_decode_mean_acceptance_length",
                                "Tokens produced per verifying step: 1 + accepted / drafts.");
  Counter* draft_s = &registry.counter("deepinfer:spec_decode_draft_seconds_total",
                                       "Time drafting steps spent in the drafter (propose and observe).");
  Counter* verify_s =
      &registry.counter("deepinfer:spec_decode_verify_seconds_total",
                        "Time drafting steps spent in the target forward and the verification.");
  Gauge* target_scale =
      &registry.gauge("deepinfer:spec_decode_target_cost_scale",
                      "Adaptive policy: observed / start-up cost of the target forward (1 until observed).");
  Gauge* draft_scale =
      &registry.gauge("deepinfer:spec_decode_draft_cost_scale",
                      "Adaptive policy: observed / start-up cost of the drafter (1 until observed).");
  Gauge* step_overhead = &registry.gauge(
      "deepinfer:spec_decode_step_overhead_seconds",
      "Adaptive policy: a decode step's time besides its forwards (planning, sampling), paid once per step.");
  registry.add_collector([=, &engine] {
    const EngineStats s = engine.stats();
    drafts->set_total(static_cast<double>(s.spec_decode_num_drafts));
    draft_tokens->set_total(static_cast<double>(s.spec_decode_num_draft_tokens));
    accepted->set_total(static_cast<double>(s.spec_decode_num_accepted_tokens));
    for (size_t j = 0; j < s.spec_decode_num_accepted_tokens_per_pos.size(); ++j)
      per_pos->with({std::to_string(j)})
          .set_total(static_cast<double>(s.spec_decode_num_accepted_tokens_per_pos[j]));
    mean->set(mean_acceptance_length(s));
    draft_s->set_total(1e-9 * static_cast<double>(s.spec_decode_draft_ns_total));
    verify_s->set_total(1e-9 * static_cast<double>(s.spec_decode_verify_ns_total));
    target_scale->set(s.spec_decode_target_cost_scale);
    draft_scale->set(s.spec_decode_draft_cost_scale);
    step_overhead->set(1e-9 * s.spec_decode_step_overhead_ns);
  });
}

void print_spec_decode_summary(const char* cmd, const EngineStats& s) {
  std::string per_pos;
  for (size_t j = 0; j < s.spec_decode_num_accepted_tokens_per_pos.size(); ++j) {
    const double rate = s.spec_decode_num_drafts > 0
                            ? static_cast<double>(s.spec_decode_num_accepted_tokens_per_pos[j]) /
                                  static_cast<double>(s.spec_decode_num_drafts)
                            : 0.0;
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%.2f", j == 0 ? "" : " ", rate);
    per_pos += buf;
  }
  std::fprintf(
      stderr,
      "%s: speculative decoding: %lld verifying steps, %lld draft tokens, %lld accepted, mean acceptance "
      "length %.2f (acceptance by position: %s); drafting %.3f s, target and verification %.3f s; cost "
      "scales (observed / start-up) target %.2f, drafter %.2f; step overhead %.3f ms\n",
      cmd, static_cast<long long>(s.spec_decode_num_drafts),
      static_cast<long long>(s.spec_decode_num_draft_tokens),
      static_cast<long long>(s.spec_decode_num_accepted_tokens), mean_acceptance_length(s), per_pos.c_str(),
      1e-9 * static_cast<double>(s.spec_decode_draft_ns_total),
      1e-9 * static_cast<double>(s.spec_decode_verify_ns_total), s.spec_decode_target_cost_scale,
      s.spec_decode_draft_cost_scale, 1e-6 * s.spec_decode_step_overhead_ns);
}

}  // namespace ds::cli
