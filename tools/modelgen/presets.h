// Model shapes that `deepinfer make-model` can generate (docs/models.md lists the exact values).
// tiny: CI tests (tens of MB, seconds); small: dims >= 256 so FP8 has several 128×128 blocks per
// matrix; bench: a V2-Lite-width model of a few GB for performance work.
#pragma once

#include <string_view>
#include <vector>

#include "base/status.h"
#include "weights/model_config.h"

namespace ds::modelgen {

// The preset's DeepSeek-V3 config (model_type deepseek_v3, vocab 129280 so the real tokenizer
// works). `fp8` adds quantization_config {fp8, e4m3, dynamic, [128, 128]}.
// Unknown name: invalid_argument naming the accepted presets.
Result<ModelConfig> deepseek_v3_preset(std::string_view preset, bool fp8);

// The preset's DeepSeek-V4 config (model_type deepseek_v4, the released V4-Flash key set and
// layer schedule scaled down; docs/models.md). `fp8` (as released): quantization_config
// {fp8, e4m3, dynamic, ue8m0, [128, 128]} and expert_dtype fp4; otherwise every weight is BF16.
Result<ModelConfig> deepseek_v4_preset(std::string_view preset, bool fp8);

// The preset's DeepSeek-V4.1 config (model_type deepseek_v41, the released roles scaled down;
// docs/models.md): tiny, small or bench, each with Engram on layers 1 and 2. `fp8` (as released): FP8
// with 32×32 E8M0 tiles and FP4 experts; otherwise every weight is BF16. No DSpark stages yet.
Result<ModelConfig> deepseek_v41_preset(std::string_view preset, bool fp8);

// The preset for `arch` ("deepseek_v3" | "deepseek_v4" | "deepseek_v41"); invalid_argument names
// the accepted ones.
Result<ModelConfig> arch_preset(std::string_view arch, std::string_view preset, bool fp8);

std::vector<std::string_view> preset_names();

}  // namespace ds::modelgen
