#include "model/v4_numerics_options.h"

#include <array>
#include <vector>

namespace ds {

namespace {

constexpr std::array<std::string_view, static_cast<size_t>(Bf16Point::count)> kPointNames = {
    "sub_norm",   "q_norm",        "kv_norm",    "comp_norm", "final_norm", "mtp_norm", "mhc_collapse",
    "mhc_expand", "head_collapse", "attn_probs", "expert_h",  "index_w",    "mtp_h0"};

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(sep, begin);
    if (end == std::string_view::npos) end = text.size();
    parts.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return parts;
}

Status bad(std::string_view item, std::string_view why) {
  return Status(ErrorCode::invalid_argument, "--numerics: '" + std::string(item) + "': " + std::string(why));
}

Result<bool> parse_on_off(std::string_view item, std::string_view value) {
  if (value == "on") return true;
  if (value == "off") return false;
  return bad(item, "expected on or off");
}

std::string all_point_names() {
  std::string s;
  for (std::string_view n : kPointNames) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

// "a+b" -> only those; "-a+b" -> all but those; "all" / "none".
Result<uint32_t> parse_points(std::string_view item, std::string_view value) {
  if (value == "all") return kAllBf16Points;
  if (value == "none") return 0u;
  const bool all_but = !value.empty() && value.front() == '-';
  if (all_but) value.remove_prefix(1);
  uint32_t bits = 0;
  for (std::string_view name : split(value, '+')) {
    size_t i = 0;
    while (i < kPointNames.size() && kPointNames[i] != name) ++i;
    if (i == kPointNames.size())
      return bad(item, "unknown bf16 point '" + std::string(name) + "' (known: " + all_point_names() + ")");
    bits |= bf16_point_bit(static_cast<Bf16Point>(i));
  }
  return all_but ? kAllBf16Points & ~bits : bits;
}

}  // namespace

std::string_view bf16_point_name(Bf16Point p) { return kPointNames[static_cast<size_t>(p)]; }

Result<V4Numerics> parse_v4_numerics(std::string_view text) {
  V4Numerics num;
  if (text.empty()) return num;
  for (std::string_view item : split(text, ',')) {
    if (item == "production") {
      num = V4Numerics{};
      continue;
    }
    if (item == "no-bf16") {
      num.bf16_points = 0;
      continue;
    }
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return bad(item,
                 "expected production, no-bf16 or key=value (keys: bf16, bf16_points, "
                 "shared_expert_clamp, kv_fp8_sim, q_head_norm, index_keys)");
    }
    const std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "bf16") {
      DS_ASSIGN_OR_RETURN(bool on, parse_on_off(item, value));
      num.bf16_points = on ? kAllBf16Points : 0;
    } else if (key == "bf16_points") {
      DS_ASSIGN_OR_RETURN(num.bf16_points, parse_points(item, value));
    } else if (key == "shared_expert_clamp") {
      DS_ASSIGN_OR_RETURN(num.shared_expert_clamp, parse_on_off(item, value));
    } else if (key == "kv_fp8_sim") {
      DS_ASSIGN_OR_RETURN(num.kv_fp8_sim, parse_on_off(item, value));
    } else if (key == "q_head_norm") {
      if (value == "model") {
        num.q_head_norm = -1;
      } else {
        DS_ASSIGN_OR_RETURN(bool on, parse_on_off(item, value));
        num.q_head_norm = on ? 1 : 0;
      }
    } else if (key == "index_keys") {
      if (value != "every_step" && value != "on_group") return bad(item, "expected every_step or on_group");
      num.index_keys_on_group = value == "on_group";
    } else {
      return bad(item,
                 "unknown key (keys: bf16, bf16_points, shared_expert_clamp, kv_fp8_sim, q_head_norm, "
                 "index_keys)");
    }
  }
  return num;
}

std::string format_v4_numerics(const V4Numerics& num) {
  std::string points;
  if (num.bf16_points == kAllBf16Points) {
    points = "all";
  } else if (num.bf16_points == 0) {
    points = "none";
  } else {
    for (size_t i = 0; i < kPointNames.size(); ++i) {
      if (!num.rounds(static_cast<Bf16Point>(i))) continue;
      if (!points.empty()) points += '+';
      points += kPointNames[i];
    }
  }
  std::string text = "bf16_points=" + points +
                     ",shared_expert_clamp=" + (num.shared_expert_clamp ? "on" : "off") +
                     ",kv_fp8_sim=" + (num.kv_fp8_sim ? "on" : "off");
  if (num.q_head_norm >= 0) text += std::string(",q_head_norm=") + (num.q_head_norm ? "on" : "off");
  if (num.index_keys_on_group) text += ",index_keys=on_group";
  return text;
}

}  // namespace ds
