#include "commands.h"

namespace ds::cli {

void add_make_model_command(CLI::App& /*app*/, CommandContext& /*ctx*/) {}

}  // namespace ds::cli
