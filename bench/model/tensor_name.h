// Reading checkpoint tensor names ("<prefix><i>.<rest>": V3's "model.layers.", V4 / V4.1's
// "layers.") for model_bench's weight and FLOP accounting (active_weights*.cpp, prefill_flops_v41.cpp).
#pragma once

#include <charconv>
#include <string_view>
#include <system_error>

namespace ds::bench {

// Layer index of "<prefix><i>.<rest>" (rest returned), or -1.
inline int layer_index(std::string_view name, std::string_view& rest, std::string_view prefix = "layers.") {
  if (!name.starts_with(prefix)) return -1;
  name.remove_prefix(prefix.size());
  int idx = -1;
  const auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), idx);
  if (ec != std::errc() || ptr == name.data() + name.size() || *ptr != '.') return -1;
  rest = name.substr(static_cast<size_t>(ptr - name.data()) + 1);
  return idx;
}

}  // namespace ds::bench
