// libFuzzer target: parse_model_config over arbitrary text must return ok or a Status (never throw,
// crash or hit UB), and every accepted config must survive model_config_to_json -> parse unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "weights/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = ds::parse_model_config(text, "fuzz/config.json");
  if (!config.ok()) {
    if (config.status().message().find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  auto again = ds::parse_model_config(ds::model_config_to_json(*config), "round-trip");
  if (!again.ok() || !(*again == *config)) __builtin_trap();
  return 0;
}
