// `deepinfer make-model`: generate a random-weight checkpoint in the real DeepSeek-V3 (HF) or
// DeepSeek-V4 format, with a tokenizer the model's prompt encoding works with (docs/models.md).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "base/thread_pool.h"
#include "commands.h"
#include "modelgen/make_model.h"
#include "progress_bar.h"

namespace ds::cli {
namespace {

struct MakeModelArgs {
  modelgen::MakeModelOptions options;
  std::string engram = "on";
  std::string dspark = "on";
  std::string dtype;  // empty: the architecture's default (V3 bf16, V4 fp8 as released)
  int n_threads = 0;
};

double gib(size_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

int run_make_model(MakeModelArgs& args) {
  if (args.dtype.empty()) args.dtype = args.options.arch == "deepseek_v3" ? "bf16" : "fp8";
  args.options.fp8 = args.dtype == "fp8";
  args.options.engram = args.engram == "on";
  args.options.dspark = args.dspark == "on";
  const int n_threads = args.n_threads > 0
                            ? args.n_threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(n_threads);
  std::unique_ptr<ProgressBar> bar;  // created at the first shard, when the count is known
  args.options.on_shard_generated = [&bar](size_t done, size_t total) {
    if (!bar) bar = std::make_unique<ProgressBar>("make-model", static_cast<int64_t>(total));
    bar->advance(1, "shard " + std::to_string(done) + "/" + std::to_string(total));
  };
  Result<modelgen::MakeModelReport> report = modelgen::make_model(args.options, pool);
  bar.reset();  // finishes the line before the summary
  if (!report.ok()) {
    std::fprintf(stderr, "deepinfer make-model: error: %s\n", report.status().to_string().c_str());
    return 1;
  }
  const modelgen::ModelBytes& b = report->bytes;
  std::printf(
      "wrote %s: %s %s %s seed %llu, %zu tensors in %d shards, %.3f GiB; active per token "
      "%.3f GiB (MTP step %.3f GiB)\n",
      args.options.out_dir.c_str(), args.options.arch.c_str(), args.options.preset.c_str(),
      args.dtype.c_str(), static_cast<unsigned long long>(args.options.seed), report->n_tensors,
      report->n_shards, gib(b.total), gib(b.active_per_token), gib(b.mtp_active_per_token));
  return 0;
}

}  // namespace

void add_make_model_command(CLI::App& app, CommandContext& ctx) {
  auto args = std::make_shared<MakeModelArgs>();
  args->options.tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR;
  CLI::App* cmd = app.add_subcommand(
      "make-model", "Write a random-weight checkpoint (config.json, sharded safetensors, tokenizer)");
  cmd->add_option("--arch", args->options.arch, "Architecture")
      ->check(CLI::IsMember({"deepseek_v3", "deepseek_v4", "deepseek_v41"}))
      ->capture_default_str();
  cmd->add_option("--preset", args->options.preset, "Size: tiny | small | bench")
      ->check(CLI::IsMember({"tiny", "small", "bench"}))
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype,
                  "Linear weights: bf16 | fp8 (V3: E4M3 with 128x128 F32 scales, the default bf16; "
                  "V4: E4M3 with 128x128 E8M0 scales and FP4 experts as released, the default; "
                  "V4.1: the same with 32x32 tiles)")
      ->check(CLI::IsMember({"bf16", "fp8"}));
  cmd->add_option("--engram", args->engram,
                  "deepseek_v41: on = Engram tables on the preset's layers (as released), off = none")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option(
         "--dspark", args->dspark,
         "deepseek_v41: on = the 3 DSpark draft stages mtp.0..2 (as released; docs/dspark.md), off = none")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--seed", args->options.seed, "Random seed (same seed -> identical bytes)")
      ->capture_default_str();
  cmd->add_option("--out", args->options.out_dir, "Output directory")->required();
  cmd->add_option("--tokenizer", args->options.tokenizer_dir,
                  "Directory with tokenizer.json and tokenizer_config.json to copy (deepseek_v4: V4's "
                  "template markers <think>, </think>, ｜DSML｜, <｜latest_reminder｜> are added)")
      ->capture_default_str();
  cmd->add_option("--threads", args->n_threads, "Worker threads (0 = all cores; output is the same)")
      ->capture_default_str();
  cmd->callback([args, &ctx] { ctx.exit_code = run_make_model(*args); });
}

}  // namespace ds::cli
