// deepinfer: one binary, many subcommands (generate, logits, inspect, tokenize, detokenize,
// make-model, serve, route, bench serve/plot, eval).
#include <cstdio>
#include <exception>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"deepinfer — DeepSeek inference engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "deepinfer 0.1.0");
  ds::cli::CommandContext ctx;
  ds::cli::add_generate_command(app, ctx);
  ds::cli::add_logits_command(app, ctx);
  ds::cli::add_inspect_command(app, ctx);
  ds::cli::add_tokenize_commands(app, ctx);
  ds::cli::add_make_model_command(app, ctx);
  ds::cli::add_serve_command(app, ctx);
  ds::cli::add_route_command(app, ctx);
  ds::cli::add_bench_commands(app, ctx);
  ds::cli::add_eval_command(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the usage message
    return 2;     // usage errors exit 2 whatever CLI11's own code is
  } catch (const std::exception& e) {
    std::fprintf(stderr, "deepinfer: error: %s\n", e.what());
    return 1;
  }
  return ctx.exit_code;
}
