#include "model/model_registry.h"

#include <array>

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

Result<std::unique_ptr<ModelRunner>> load_v3(const std::string& dir, const ModelConfig&,
                                             const ModelOptions& opts) {
  DS_TRY(check_v3_numerics(opts.numerics));
  DS_ASSIGN_OR_RETURN(std::unique_ptr<DeepSeekV3> m, DeepSeekV3::load(dir, opts));
  return std::unique_ptr<ModelRunner>(std::move(m));
}

Result<std::unique_ptr<ModelRunner>> load_v4(const std::string& dir, const ModelConfig&,
                                             const ModelOptions& opts) {
  DS_ASSIGN_OR_RETURN(V4Numerics num, parse_v4_numerics(opts.numerics));
  DS_ASSIGN_OR_RETURN(std::unique_ptr<DeepSeekV4> m, DeepSeekV4::load(dir, opts, num));
  return std::unique_ptr<ModelRunner>(std::move(m));
}

// DeepSeekV3 runs V2-style and V3 checkpoints; V3.2 (deepseek_v32) parses but has no model yet.
constexpr std::array<ModelRegistration, 4> kModels{{
    {"deepseek_v2", load_v3},
    {"deepseek_v3", load_v3},
    {"deepseek_v4", load_v4},
    {"deepseek_v41", load_deepseek_v41},
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
