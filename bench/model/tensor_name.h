// Reading V4 / V4.1 tensor names ("layers.<i>.<rest>"; V3's start with "model.") for model_bench's
// weight and FLOP accounting (active_weights_v4.cpp, prefill_flops_v41.cpp).
#pragma once

#include <charconv>
#include <string_view>
#include <system_error>

namespace ds::bench {

// Layer index of "layers.<i>.<rest>" (rest returned), or -1.
inline int layer_index(std::string_view name, std::string_view& rest) {
  constexpr std::string_view kPrefix = "layers.";
  if (!name.starts_with(kPrefix)) return -1;
  name.remove_prefix(kPrefix.size());
  int idx = -1;
  const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), idx);
  if (ec != std::errc() || ptr == name.data() + name.size() || *ptr != '.') return -1;
  rest = name.substr(static_cast<size_t>(ptr - name.data()) + 1);
  return idx;
}

}  // namespace ds::bench
