// Text form of V4Numerics, as `deepinfer logits|generate|serve --numerics` take it
// (docs/numerics.md "V4 numerics options"): comma-separated items, applied left to right on the
// defaults —
//   production                     the defaults
//   no-bf16                        no bf16 rounding point (bf16=off)
//   bf16=on|off                    all / none of the bf16 rounding points
//   bf16_points=a+b|-a+b|all|none  only those points / all but those (names: bf16_point_name)
//   shared_expert_clamp=on|off     the shared expert clamps with swiglu_limit too
//   kv_fp8_sim=on|off              FP8 simulation of the window/compressed KV
//   q_head_norm=model|on|off       per-head query RMS normalisation (model: V4 on, V4.1 off)
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"
#include "model/v4_numerics.h"

namespace ds {

// invalid_argument with a message naming the bad item and the accepted ones.
Result<V4Numerics> parse_v4_numerics(std::string_view text);

// The canonical text of `num` (parse_v4_numerics(format_v4_numerics(n)) == n).
std::string format_v4_numerics(const V4Numerics& num);

// The reference's name of a rounding point ("sub_norm", ...).
std::string_view bf16_point_name(Bf16Point p);

}  // namespace ds
