#include "commands.h"

namespace ds::cli {

void add_logits_command(CLI::App& /*app*/, CommandContext& /*ctx*/) {}

}  // namespace ds::cli
