// Subcommands of the `deepinfer` binary. Each add_*_command registers its CLI11 subcommand;
// its callback stores the process exit code in `exit_code` (0 ok, 1 runtime error, 2 usage).
// Errors are printed as one line naming the file/field; no exceptions escape a command.
#pragma once

#include <CLI/CLI.hpp>

namespace ds::cli {

struct CommandContext {
  int exit_code = 0;
};

void add_generate_command(CLI::App& app, CommandContext& ctx);
void add_logits_command(CLI::App& app, CommandContext& ctx);
void add_inspect_command(CLI::App& app, CommandContext& ctx);
void add_tokenize_commands(CLI::App& app, CommandContext& ctx);  // tokenize + detokenize
void add_make_model_command(CLI::App& app, CommandContext& ctx);
void add_serve_command(CLI::App& app, CommandContext& ctx);
void add_route_command(CLI::App& app, CommandContext& ctx);   // links no model code (docs/router.md)
void add_bench_commands(CLI::App& app, CommandContext& ctx);  // bench serve + bench plot
void add_bench_serve_command(CLI::App& bench, CommandContext& ctx);
void add_bench_plot_command(CLI::App& bench, CommandContext& ctx);
void add_eval_command(CLI::App& app, CommandContext& ctx);

}  // namespace ds::cli
