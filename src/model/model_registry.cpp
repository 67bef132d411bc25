#include "model/model_registry.h"

#include <algorithm>
#include <array>
#include <string>

#include "model/deepseek_v3.h"
#include "model/deepseek_v4.h"
#include "model/deepseek_v41.h"
#include "model/v4_numerics_options.h"

namespace ds {

namespace {

// V3 has no numerics options: its activations are f32 end to end (docs/numerics.md), so only the
// names of the default modes are accepted (no-bf16 too: V3 has no bf16 point to drop).
Status check_v3_numerics(const std::string& text) {
  if (text.empty() || text == "production" || text == "no-bf16") return ok_status();
  return Status(
      ErrorCode::invalid_argument,
      "--numerics: '" + text + "': DeepSeek-V3 has no numerics options (production or no-bf16 only)");
}

// Takes the model-independent item `bf16_activations=on|off` out of the --numerics text (the last
// one wins) and leaves the rest to the model's own parser.
Result<ModelOptions> take_common_numerics(const ModelOptions& in) {
  ModelOptions out = in;
  std::string rest;
  size_t start = 0;
  const std::string& text = in.numerics;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    if (item == "bf16_activations=on") {
      out.bf16_activations = true;
    } else if (item == "bf16_activations=off") {
      out.bf16_activations = false;
    } else if (item.rfind("bf16_activations=", 0) == 0) {
      return Status(ErrorCode::invalid_argument,
                    "--numerics: '" + item + "': expected bf16_activations=on or off");
    } else {
      rest += (rest.empty() ? "" : ",") + item;
    }
    start = comma + 1;
  }
  out.numerics = rest;
  return out;
}

Result<std::unique_ptr<ModelRunner>> load_v3(const std::string& dir, const ModelConfig&,
                                             const ModelOptions& given) {
  DS_ASSIGN_OR_RETURN(const ModelOptions opts, take_common_numerics(given));
  DS_TRY(check_v3_numerics(opts.numerics));
  if (opts.decoder_replay.compact) {
    return Status(
        ErrorCode::model_unsupported,
        "--yoco-prefill-truncation-mode compact: decoder SWA bounded replay is a deepseek_v41 feature");
  }
  DS_ASSIGN_OR_RETURN(std::unique_ptr<DeepSeekV3> m, DeepSeekV3::load(dir, opts));
  return std::unique_ptr<ModelRunner>(std::move(m));
}

Result<std::unique_ptr<ModelRunner>> load_v4(const std::string& dir, const ModelConfig&,
                                             const ModelOptions& given) {
  DS_ASSIGN_OR_RETURN(const ModelOptions opts, take_common_numerics(given));
  DS_ASSIGN_OR_RETURN(V4Numerics num, parse_v4_numerics(opts.numerics));
  DS_ASSIGN_OR_RETURN(std::unique_ptr<DeepSeekV4> m, DeepSeekV4::load(dir, opts, num));
  return std::unique_ptr<ModelRunner>(std::move(m));
}

Result<std::unique_ptr<ModelRunner>> load_v41(const std::string& dir, const ModelConfig& cfg,
                                              const ModelOptions& given) {
  DS_ASSIGN_OR_RETURN(const ModelOptions opts, take_common_numerics(given));
  return load_deepseek_v41(dir, cfg, opts);
}

// DeepSeekV3 runs V2-style and V3 checkpoints; V3.2 (deepseek_v32) parses but has no model yet.
constexpr std::array<ModelRegistration, 4> kModels{{
    {"deepseek_v2", load_v3},
    {"deepseek_v3", load_v3},
    {"deepseek_v4", load_v4},
    {"deepseek_v41", load_v41},
}};

}  // namespace

std::span<const ModelRegistration> registered_models() { return kModels; }

Result<std::optional<EngramMapRequest>> engram_map_request(const std::string& dir) {
  DS_ASSIGN_OR_RETURN(const ModelConfig cfg, load_model_config(dir));
  if (!cfg.engram) return std::optional<EngramMapRequest>();
  return std::optional<EngramMapRequest>(EngramMapRequest{cfg.vocab_size, cfg.engram->compressed_vocab_size});
}

Result<std::unique_ptr<ModelRunner>> load_model_runner(const std::string& dir, const ModelOptions& opts) {
  DS_ASSIGN_OR_RETURN(ModelConfig cfg, load_model_config(dir));
  for (const ModelRegistration& r : kModels) {
    if (r.model_type == cfg.model_type) return r.factory(dir, cfg, opts);
  }
  std::string known;
  for (const ModelRegistration& r : kModels) known += (known.empty() ? "" : ", ") + std::string(r.model_type);
  return Status(ErrorCode::model_unsupported,
                dir + "/config.json: model_type '" + cfg.model_type + "' has no model (runs: " + known + ")");
}

}  // namespace ds
