#include "model/deepseek_v41.h"

#include "model/deepseek_v4.h"
#include "model/v4_numerics_options.h"

namespace ds {

Result<std::unique_ptr<ModelRunner>> load_deepseek_v41(const std::string& dir, const ModelConfig& cfg,
                                                       const ModelOptions& opts) {
  DS_ASSIGN_OR_RETURN(V4Numerics num, parse_v4_numerics(opts.numerics));
  if (!cfg.is_v41()) {
    return Status(ErrorCode::model_unsupported,
                  dir + "/config.json: model_type '" + cfg.model_type + "' is not deepseek_v41");
  }
  DS_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(dir));
  DS_ASSIGN_OR_RETURN(std::unique_ptr<DeepSeekV4> m, DeepSeekV4::load(std::move(ckpt), cfg, opts, num));
  return std::unique_ptr<ModelRunner>(std::move(m));
}

}  // namespace ds
