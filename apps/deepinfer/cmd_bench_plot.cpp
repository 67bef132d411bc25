// deepinfer bench plot: PNG Pareto charts from `bench serve` result files, drawn by matplotlib
// (Debian's python3-matplotlib) running the script embedded from bench/bench_plot.py.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "command_support.h"
#include "commands.h"

namespace ds::embedded {
extern const std::string_view bench_plot_py;
}

extern char** environ;

namespace ds::cli {

namespace {

struct BenchPlotOptions {
  std::vector<std::string> result_files;
  std::string out_dir = ".";
  // Debian's interpreter, where apt puts matplotlib (a pyenv or venv python3 on PATH may lack it).
  std::string python = std::filesystem::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
};

int run_bench_plot(const BenchPlotOptions& o) {
  const std::string cmd = "bench plot";
  for (const std::string& f : o.result_files) {
    if (!std::filesystem::is_regular_file(f)) return report_usage_error(cmd, "no such result file: " + f);
  }
  std::vector<std::string> args = {o.python, "-c", std::string(embedded::bench_plot_py), o.out_dir};
  args.insert(args.end(), o.result_files.begin(), o.result_files.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, o.python.c_str(), nullptr, nullptr, argv.data(), environ) != 0)
    return report_error(cmd, Status(ErrorCode::io_error, "cannot run " + o.python));
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return report_error(cmd,
                        Status(ErrorCode::io_error,
                               o.python + " failed drawing the charts (is python3-matplotlib installed?)"));
  }
  return 0;
}

}  // namespace

void add_bench_plot_command(CLI::App& bench, CommandContext& ctx) {
  auto o = std::make_shared<BenchPlotOptions>();
  CLI::App* sub = bench.add_subcommand("plot", "Draw PNG Pareto charts from bench serve result files");
  sub->add_option("results", o->result_files, "Result JSON files (one point each)")->required();
  sub->add_option("--out", o->out_dir, "Output folder (decode_pareto.png, prefill_pareto.png)")
      ->capture_default_str();
  sub->add_option("--python", o->python, "Python interpreter with matplotlib")->capture_default_str();
  sub->callback([o, &ctx] { ctx.exit_code = run_bench_plot(*o); });
}

void add_bench_commands(CLI::App& app, CommandContext& ctx) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks against a running server");
  bench->require_subcommand(1);
  add_bench_serve_command(*bench, ctx);
  add_bench_plot_command(*bench, ctx);
}

}  // namespace ds::cli
