#include "commands.h"

namespace ds::cli {

void add_tokenize_commands(CLI::App& /*app*/, CommandContext& /*ctx*/) {}

}  // namespace ds::cli
