#include "decoder_replay_option.h"

#include <CLI/CLI.hpp>

#include <cstdlib>

namespace ds::cli {

namespace {

constexpr const char* kModeEnv = "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE";
constexpr const char* kKeepEnv = "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS";

// The flag's value, else the variable's (read once, on the main thread before any other starts).
std::pair<std::string, std::string> pick(const std::string& flag, const char* flag_name, const char* env) {
  if (!flag.empty()) return {flag, flag_name};
  const char* v = std::getenv(env);
  return {v != nullptr ? v : "", env};
}

}  // namespace

void add_decoder_replay_options(CLI::App* sub, DecoderReplayFlags& flags) {
  sub->add_option(
      "--yoco-prefill-truncation-mode", flags.mode,
      "V4.1 decoder SWA bounded replay: off (exact) | compact (the decoder layers run only on the "
      "prompt's last --yoco-prefill-keep-tokens tokens; default: $DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE "
      "or off)");
  sub->add_option("--yoco-prefill-keep-tokens", flags.keep,
                  "Prompt tokens the decoder layers run on with compact (>= sliding_window; default: "
                  "$DEEPINFER_YOCO_PREFILL_KEEP_TOKENS or 140)");
}

Result<DecoderReplayOptions> resolve_decoder_replay(const DecoderReplayFlags& flags) {
  DecoderReplayOptions o;
  const auto [mode, mode_name] = pick(flags.mode, "--yoco-prefill-truncation-mode", kModeEnv);
  if (!mode.empty()) {
    DS_ASSIGN_OR_RETURN(o.compact, parse_decoder_replay_mode(mode, mode_name));
  }
  const auto [keep, keep_name] = pick(flags.keep, "--yoco-prefill-keep-tokens", kKeepEnv);
  if (!keep.empty()) {
    DS_ASSIGN_OR_RETURN(o.keep_tokens, parse_decoder_replay_keep(keep, keep_name));
  }
  return o;
}

}  // namespace ds::cli
