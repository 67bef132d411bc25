// Small pieces every model command shares: the --isa/--threads options and the one-line error.
#pragma once

#include <string>

#include "base/status.h"
#include "kernels/isa.h"

namespace ds::cli {

// "auto" -> best_isa(); "reference" | "avx2" | "avx512" -> that path if this CPU has it.
// invalid_argument otherwise.
Result<Isa> parse_isa_option(const std::string& value);

// Threads for --threads 0 (default): the machine's hardware threads.
int resolve_threads(int requested);

// Prints "deepinfer <command>: error: <code>: <message>" on one line to stderr; returns 1.
int report_error(const std::string& command, const Status& status);
// For usage errors found after CLI11's parse (bad --ids, --prefill out of range): exit code 2.
int report_usage_error(const std::string& command, const std::string& message);

// invalid_argument when `text` is not --numerics syntax (checked before loading, for exit code 2;
// whether the model has those options is the model factory's to say).
Status check_numerics_option(const std::string& text);

// invalid_argument when `model_dir` is the built-in default and has no config.json: the demo model's
// weights are not in every checkout yet (docs/demo-model.md), so say that rather than name a missing file.
Status check_default_model_dir(const std::string& model_dir, const std::string& default_model_dir);

// --numerics of logits / generate / serve (model/v4_numerics_options.h; docs/numerics.md).
inline constexpr const char* kNumericsOptionHelp =
    "V4/V4.1 numerics: production | no-bf16 | key=value,... (bf16=on|off, bf16_points=a+b|-a+b, "
    "shared_expert_clamp=on|off, kv_fp8_sim=on|off, q_head_norm=model|on|off, "
    "index_keys=every_step|on_group (V4.1); docs/numerics.md). "
    "V3: production | no-bf16";

}  // namespace ds::cli
