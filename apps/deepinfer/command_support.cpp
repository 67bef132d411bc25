#include "command_support.h"

#include <cstdio>
#include <filesystem>
#include <thread>

#include "model/v4_numerics_options.h"

namespace ds::cli {

Status check_numerics_option(const std::string& text) {
  Result<V4Numerics> num = parse_v4_numerics(text);
  return num.ok() ? ok_status() : num.status();
}

Status check_default_model_dir(const std::string& model_dir, const std::string& default_model_dir) {
  if (model_dir != default_model_dir ||
      std::filesystem::exists(std::filesystem::path(model_dir) / "config.json"))
    return ok_status();
  return Status(
      ErrorCode::invalid_argument,
      "no --model given, and the built-in demo model in " + model_dir +
          " has no trained weights in this checkout yet (docs/demo-model.md); pass --model DIR, e.g. "
          "a checkpoint from `deepinfer make-model`");
}

Result<Isa> parse_isa_option(const std::string& value) {
  if (value == "auto") return best_isa();
  const std::optional<Isa> isa = isa_from_name(value);
  if (!isa) {
    return Status(ErrorCode::invalid_argument,
                  "--isa: '" + value + "' is not auto, reference, avx2 or avx512");
  }
  if (!isa_supported(*isa)) {
    return Status(ErrorCode::invalid_argument, "--isa: this CPU does not support " + value);
  }
  return *isa;
}

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

int report_error(const std::string& command, const Status& status) {
  std::string line = status.to_string();
  for (char& c : line) {
    if (c == '\n') c = ' ';  // one line, whatever the message
  }
  std::fprintf(stderr, "deepinfer %s: error: %s\n", command.c_str(), line.c_str());
  return 1;
}

int report_usage_error(const std::string& command, const std::string& message) {
  std::fprintf(stderr, "deepinfer %s: usage error: %s\n", command.c_str(), message.c_str());
  return 2;
}

}  // namespace ds::cli
