// model_bench: decode tok/s at batch 1 and prefill tok/s of a DeepSeek-V3-family or V4
// checkpoint, each against its roofline from machine peaks measured in the same run:
//   decode roofline  = read bandwidth / bytes of active weights per token (stored precision; V4's
//                      FP4 experts at 4.25 bits) + the cache rows one step reads
//   prefill roofline = fp32 FMA peak / FLOPs per prompt token (with --numerics bf16_activations=on on
//                      a CPU with AVX512_BF16: the bf16 dot peak, the matrix peak of that path)
//   model_bench --model DIR [--threads N] [--isa avx512] [--prompt 512] [--decode-steps 32] [--quick]
//               [--context N] [--prefill-runs 0] [--decoder-replay-keep K] [--numerics TEXT]
// --decoder-replay-keep K (V4.1): also times the prefill with decoder SWA bounded replay
// (model/decoder_replay.h: the decoder layers on the prompt's last K tokens), on the same loaded
// model in the same run, with its FLOPs (prefill_flops_v41.h) and GFLOP/s against the same peak.
// --context N decodes after an N-token prompt (prefilled in chunks of --prompt tokens), so the
// decode figure includes what a step reads at that context; --prefill-runs 0 skips the prefill case.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>
#include <thread>
#include <vector>

#include "active_weights.h"
#include "active_weights_v4.h"
#include "base/clock.h"
#include "engine/model_loader.h"
#include "kernels/isa.h"
#include "machine/bench_timing.h"
#include "machine/host_load.h"
#include "machine/peaks.h"
#include "machine/read_probe.h"
#include "model/decoder_replay.h"
#include "prefill_flops_v41.h"
#include "weights/checkpoint.h"
#include "weights/layer_spec.h"

namespace {

using ds::bench::ActiveWeights;

constexpr double kMB = 1e6;

struct BenchArgs {
  std::string model_dir;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string isa_name;
  int64_t prompt_len = 512;
  int64_t decode_prompt_len = 16;  // --context: tokens in the sequence before the timed decode
  int decode_steps = 32;
  int paired_steps = 16;  // (decode step, read pass) pairs after the timed steps
  int decode_warmup_steps = 2;
  int prefill_runs = 3;
  bool quick = false;
  uint64_t seed = 42;
  int64_t decoder_replay_keep = 0;  // V4.1: > 0 also times the prefill with decoder replay
  std::string numerics;             // ModelOptions::numerics (e.g. bf16_activations=on)
};

// Prompt tokens drawn uniformly from the vocabulary with a fixed seed (the speed of a forward
// does not depend on which ids, only on how many and which experts they route to).
std::vector<int32_t> random_tokens(int64_t n, int vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = seed;
  for (auto& id : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

// FNV-1a over the bytes of every logit: equal hashes across two builds mean bitwise-equal logits.
uint64_t fnv1a(const ds::TensorF32& logits, uint64_t h) {
  const auto* p = reinterpret_cast<const unsigned char*>(logits.data());
  const size_t n = static_cast<size_t>(logits.shape().numel()) * sizeof(float);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

int32_t argmax_row(const ds::TensorF32& logits, int64_t row) {
  const int64_t vocab = logits.shape()[logits.shape().rank - 1];
  const float* p = logits.data() + row * vocab;
  return static_cast<int32_t>(std::max_element(p, p + vocab) - p);
}

void check(const ds::Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(fmt::format("{}: {}", what, s.to_string()));
}

std::vector<ds::bench::TensorInfo> tensor_infos(const ds::Checkpoint& ckpt) {
  std::vector<ds::bench::TensorInfo> v;
  for (const ds::TensorEntry* e : ckpt.tensors()) {
    v.push_back({e->name, e->dtype, e->shape, static_cast<int64_t>(e->nbytes)});
  }
  return v;
}

std::string dtype_census(const ds::Checkpoint& ckpt) {
  std::map<std::string, std::pair<int, double>> by_dtype;
  for (const ds::TensorEntry* e : ckpt.tensors()) {
    auto& [n, bytes] = by_dtype[std::string(ds::dtype_name(e->dtype))];
    ++n;
    bytes += static_cast<double>(e->nbytes);
  }
  std::string s;
  for (const auto& [name, nb] : by_dtype) {
    s += fmt::format("{}{} x{} ({:.0f} MB)", s.empty() ? "" : ", ", name, nb.first, nb.second / kMB);
  }
  return s;
}

int run(const BenchArgs& args) {
  // 1. Peaks of this machine, now (the rooflines' denominators).
  // The read peak is the decode roofline's denominator: the full 1 GiB, 15-pass measurement
  // (copy/triad skipped, they are not used here); --quick takes the quick set.
  ds::bench::PeakOptions popt = args.quick ? ds::bench::quick_peak_options() : ds::bench::PeakOptions{};
  popt.copy_and_triad = false;
  const ds::bench::MachinePeaks peaks = ds::bench::measure_peaks(args.n_threads, popt);
  const double read_gbps = peaks.read_gbps.peak_at(args.n_threads);
  const double fma_gflops = peaks.fp32_fma_roofline_gflops(args.n_threads);
  // The matrix peak of the path the GEMMs take: bf16 activations run vdpbf16ps where the CPU has it.
  const bool bf16_dot_path = args.numerics.find("bf16_activations=on") != std::string::npos &&
                             ds::cpu_has_avx512_bf16() &&
                             (args.isa_name.empty() || args.isa_name == "avx512");
  const double matrix_gflops = bf16_dot_path ? peaks.bf16_dot_roofline_gflops(args.n_threads) : fma_gflops;
  const char* matrix_peak_name = bf16_dot_path ? "bf16 dot" : "fp32 FMA";
  fmt::print("CPU: {} [{}]\n{}\n{}\n", peaks.cpu.brand, peaks.cpu.summary(),
             ds::bench::format_host_load(ds::bench::read_host_load()),
             ds::bench::format_roofline_line(peaks));

  // 2. The model.
  ds::ModelOptions mopt;
  mopt.isa = ds::best_isa();
  if (!args.isa_name.empty()) {
    const auto isa = ds::isa_from_name(args.isa_name);
    if (!isa || !ds::isa_supported(*isa)) throw std::runtime_error("ISA not available: " + args.isa_name);
    mopt.isa = *isa;
  }
  mopt.n_threads = args.n_threads;
  mopt.numerics = args.numerics;
  if (args.decoder_replay_keep > 0)
    mopt.decoder_replay = {.compact = true, .keep_tokens = args.decoder_replay_keep};
  mopt.max_seq_len = std::max(args.prompt_len, args.decode_prompt_len + args.decode_warmup_steps +
                                                   args.decode_steps + args.paired_steps) +
                     8;
  const double t_load = ds::now_seconds();
  auto loaded = ds::load_model(args.model_dir, mopt);  // V4.1 Engram: the token map too
  check(loaded.status(), "loading the model");
  std::unique_ptr<ds::ModelRunner> model = std::move(loaded).value();
  // A second mapping of the same files, for the tensor census only (no pages are read).
  auto ckpt = ds::Checkpoint::open(args.model_dir);
  check(ckpt.status(), "opening the checkpoint");
  const ds::ModelConfig& cfg = model->config();
  fmt::print(
      "model: {} ({}, {} layers, hidden {}, {} routed experts top-{}, {} shared, vocab {}), loaded in {:.1f} "
      "s\n",
      args.model_dir, cfg.model_type, cfg.num_hidden_layers, cfg.hidden_size, cfg.n_routed_experts,
      cfg.num_experts_per_tok, cfg.n_shared_experts, cfg.vocab_size, ds::now_seconds() - t_load);
  fmt::print("tensors: {}\n", dtype_census(*ckpt));
  fmt::print("run: isa {}, {} threads, seed {}\n\n", ds::isa_name(mopt.isa), args.n_threads, args.seed);

  const bool v4 = cfg.is_v4_family();  // V4.1: the same tensor names (+ engram.*)
  const ActiveWeights aw = v4 ? ds::bench::count_active_weights_v4(tensor_infos(*ckpt), cfg)
                              : ds::bench::count_active_weights(tensor_infos(*ckpt), cfg);

  // One sequence at a time: the paged cache holds one max_seq_len sequence in 64-token blocks,
  // and each fresh sequence takes all of it.
  check(model->init_kv_cache(ds::standalone_kv_cache_config(
            mopt.max_seq_len, ds::default_block_size_tokens(model->kv_cache_layout()))),
        "allocating the KV cache");

  // 3. Warm-up prefill: faults the memory-mapped weights in (nearly every expert gets routed to).
  ds::LogitsOutput out;
  {
    const auto warm = random_tokens(args.quick ? std::min<int64_t>(64, args.prompt_len) : args.prompt_len,
                                    cfg.vocab_size, args.seed + 7);
    auto seq = ds::make_standalone_sequence(model->kv_cache_config());
    const ds::ForwardRequest req{&seq, warm, false};
    check(model->forward({&req, 1}, out), "warm-up prefill");
  }

  // 4. Prefill: one forward over a prompt_len-token prompt, fresh sequence each run.
  const auto prompt = random_tokens(args.prompt_len, cfg.vocab_size, args.seed);
  std::vector<double> prefill_s;
  const double prefill_cpu0 = ds::bench::process_cpu_seconds(), prefill_wall0 = ds::now_seconds();
  for (int r = 0; r < args.prefill_runs; ++r) {
    auto seq = ds::make_standalone_sequence(model->kv_cache_config());
    const ds::ForwardRequest req{&seq, prompt, false};
    const double t0 = ds::now_seconds();
    check(model->forward({&req, 1}, out), "prefill");
    prefill_s.push_back(ds::now_seconds() - t0);
  }
  const double prefill_share = ds::bench::cpu_share(ds::bench::process_cpu_seconds() - prefill_cpu0,
                                                    ds::now_seconds() - prefill_wall0, args.n_threads);
  const double prefill_median_s = prefill_s.empty() ? 0.0 : ds::bench::median_of(prefill_s);
  const double prefill_tok_s =
      prefill_s.empty() ? 0.0 : static_cast<double>(args.prompt_len) / prefill_median_s;
  // 4b. The same prompt with decoder replay: the model was loaded with it, and a sequence with its
  // prompt length set takes it (prompt_len 0 above: the exact prefill).
  std::vector<double> replay_s;
  for (int r = 0; args.decoder_replay_keep > 0 && r < args.prefill_runs; ++r) {
    auto seq = ds::make_standalone_sequence(model->kv_cache_config());
    seq.prompt_len = args.prompt_len;
    const ds::ForwardRequest req{&seq, prompt, false};
    const double t0 = ds::now_seconds();
    check(model->forward({&req, 1}, out), "prefill with decoder replay");
    replay_s.push_back(ds::now_seconds() - t0);
  }

  // 5. Decode at batch 1 after a decode_prompt_len-token prompt (chunks of at most prompt_len
  // tokens), greedy; each step timed on its own.
  auto seq = ds::make_standalone_sequence(model->kv_cache_config());
  const auto context = random_tokens(args.decode_prompt_len, cfg.vocab_size, args.seed + 1);
  const double context_t0 = ds::now_seconds();
  for (int64_t at = 0; at < args.decode_prompt_len; at += args.prompt_len) {
    const int64_t n = std::min(args.prompt_len, args.decode_prompt_len - at);
    const ds::ForwardRequest req{&seq, std::span<const int32_t>(context.data() + at, static_cast<size_t>(n)),
                                 false};
    check(model->forward({&req, 1}, out), "decode prompt");
  }
  if (args.decode_prompt_len > args.prompt_len)
    fmt::print("context: {} tokens prefilled in {:.1f} s\n", args.decode_prompt_len,
               ds::now_seconds() - context_t0);
  std::vector<double> step_s;
  int32_t next = argmax_row(out.logits, 0);
  uint64_t logits_hash = fnv1a(out.logits, 14695981039346656037ull);
  const double decode_cpu0 = ds::bench::process_cpu_seconds(), decode_wall0 = ds::now_seconds();
  for (int i = 0; i < args.decode_warmup_steps + args.decode_steps; ++i) {
    const ds::ForwardRequest req{&seq, std::span<const int32_t>(&next, 1), false};
    const double t0 = ds::now_seconds();
    check(model->forward({&req, 1}, out), "decode step");
    const double dt = ds::now_seconds() - t0;
    if (i >= args.decode_warmup_steps) step_s.push_back(dt);
    next = argmax_row(out.logits, 0);
    logits_hash = fnv1a(out.logits, logits_hash);
  }
  const double decode_share = ds::bench::cpu_share(ds::bench::process_cpu_seconds() - decode_cpu0,
                                                   ds::now_seconds() - decode_wall0, args.n_threads);
  const double step_median_s = ds::bench::median_of(step_s);

  // 5b. Decode steps each followed by a read pass over as many bytes as a step reads (all threads):
  // the step's bandwidth against the read rate of the same moment (ReadProbe says why).
  std::vector<double> paired_step_s, paired_read_gbps;
  if (args.paired_steps > 0) {
    ds::bench::ReadProbe probe(static_cast<int64_t>(aw.total_bytes()), args.n_threads);
    for (int i = 0; i < args.paired_steps; ++i) {
      const ds::ForwardRequest req{&seq, std::span<const int32_t>(&next, 1), false};
      const double t0 = ds::now_seconds();
      check(model->forward({&req, 1}, out), "decode step");
      paired_step_s.push_back(ds::now_seconds() - t0);
      next = argmax_row(out.logits, 0);
      paired_read_gbps.push_back(probe.pass_gbps());
    }
  }
  const double decode_tok_s = 1.0 / step_median_s;

  // 6. Rooflines.
  const int64_t mid_ctx = args.decode_prompt_len + args.decode_warmup_steps + args.decode_steps / 2;
  const double kv_bytes =
      v4 ? ds::bench::v4_cache_bytes(cfg, mid_ctx) : ds::bench::latent_cache_bytes(cfg, mid_ctx);
  const double decode_bytes = aw.total_bytes() + kv_bytes;
  const double decode_roofline = read_gbps * 1e9 / decode_bytes;
  const double attn_flops = v4 ? ds::bench::v4_attention_flops_per_token(cfg, args.prompt_len)
                               : ds::bench::mla_attention_flops_per_token(cfg, args.prompt_len);
  double prefill_flops =
      2.0 * aw.body_params + 2.0 * aw.head_params / static_cast<double>(args.prompt_len) + attn_flops;
  ds::bench::V41PrefillFlops v41_exact, v41_replay;
  if (cfg.is_v41()) {  // layer by layer (V4.1's top-k on every compressed layer, and the replay)
    auto specs = ds::v41_layer_specs(cfg);
    check(specs.status(), "layer roles");
    const int split = ds::decoder_first_layer(*specs, cfg.num_hidden_layers);
    v41_exact = ds::bench::v41_prefill_flops(tensor_infos(*ckpt), cfg, *specs, split, args.prompt_len,
                                             args.prompt_len);
    v41_replay = ds::bench::v41_prefill_flops(tensor_infos(*ckpt), cfg, *specs, split, args.prompt_len,
                                              std::min(args.decoder_replay_keep, args.prompt_len));
    prefill_flops = v41_exact.total() / static_cast<double>(args.prompt_len);
  }
  const double prefill_roofline = matrix_gflops * 1e9 / prefill_flops;

  fmt::print("decode bytes per token (stored precision incl. scales; MTP layer excluded, {} tensors):\n",
             aw.n_mtp_tensors_excluded);
  fmt::print(
      "  attention {:.1f} MB | dense MLP + shared experts + gates {:.1f} MB | routed experts (top-{} of "
      "{}{}) "
      "{:.1f} MB\n",
      aw.attention_bytes / kMB, aw.dense_bytes / kMB, cfg.num_experts_per_tok, cfg.n_routed_experts,
      v4 && cfg.expert_dtype == "fp4" ? ", FP4 at 4.25 bits" : "", aw.routed_bytes / kMB);
  fmt::print(
      "  head {:.1f} MB | norms + {}embedding row {:.2f} MB | {} at ctx {} {:.2f} MB | total {:.1f} "
      "MB\n",
      aw.head_bytes / kMB, v4 ? "mHC + " : "", aw.other_bytes / kMB,
      v4 ? "window + compressed cache" : "latent cache", mid_ctx, kv_bytes / kMB, decode_bytes / kMB);
  if (aw.n_unclassified > 0)
    fmt::print("  note: {} tensors matched no rule (counted in full)\n", aw.n_unclassified);
  if (cfg.is_v41()) {
    fmt::print("prefill FLOPs per token: {:.3f} GFLOP (V4.1, layer by layer below)\n\n", prefill_flops / 1e9);
  } else {
    fmt::print(
        "prefill FLOPs per token: 2 x {:.1f} M body params + head {:.2f} GFLOP / {} + attention {:.3f} GFLOP "
        "= "
        "{:.3f} GFLOP\n\n",
        aw.body_params / 1e6, 2.0 * aw.head_params / 1e9, args.prompt_len, attn_flops / 1e9,
        prefill_flops / 1e9);
  }

  if (cfg.is_v41()) {
    fmt::print(
        "V4.1 prefill of {} tokens, layer by layer: encoder {:.2f} GFLOP + decoder source compressor {:.2f} "
        "+ "
        "decoder {:.2f} + head {:.3f} = {:.2f} GFLOP\n",
        args.prompt_len, v41_exact.encoder / 1e9, v41_exact.source / 1e9, v41_exact.decoder / 1e9,
        v41_exact.head / 1e9, v41_exact.total() / 1e9);
  }
  if (!replay_s.empty()) {
    const double replay_median_s = ds::bench::median_of(replay_s);
    fmt::print(
        "  with decoder replay (keep {}): decoder {:.2f} GFLOP, total {:.2f} GFLOP ({:.1f}% fewer); "
        "median {:.1f} ms vs {:.1f} ms exact ({:.1f}% less time, {:.2f}x prompt tok/s)\n",
        args.decoder_replay_keep, v41_replay.decoder / 1e9, v41_replay.total() / 1e9,
        100.0 * (1.0 - v41_replay.total() / v41_exact.total()), replay_median_s * 1e3, prefill_median_s * 1e3,
        100.0 * (1.0 - replay_median_s / prefill_median_s), prefill_median_s / replay_median_s);
    fmt::print("  GFLOP/s: exact {:.1f} ({:.0f}% of the {} peak {:.1f}), replay {:.1f} ({:.0f}%)\n\n",
               v41_exact.total() / prefill_median_s / 1e9,
               100.0 * v41_exact.total() / prefill_median_s / 1e9 / matrix_gflops, matrix_peak_name,
               matrix_gflops, v41_replay.total() / replay_median_s / 1e9,
               100.0 * v41_replay.total() / replay_median_s / 1e9 / matrix_gflops);
  }
  fmt::print("{:<34} {:>10} {:>12} {:>14} {:>10} {:>8}\n", "", "tok/s", "ms/token", "roofline tok/s",
             "achieved", "target");
  fmt::print("{:<34} {:>10.2f} {:>12.2f} {:>14.2f} {:>9.0f}% {:>8}\n",
             fmt::format("decode, batch 1, ctx {} (median of {})", args.decode_prompt_len, step_s.size()),
             decode_tok_s, step_median_s * 1e3, decode_roofline, 100.0 * decode_tok_s / decode_roofline,
             ">= 75%");
  if (!prefill_s.empty())
    fmt::print("{:<34} {:>10.2f} {:>12.2f} {:>14.2f} {:>9.0f}% {:>8}\n",
               fmt::format("prefill {} tokens (median of {})", args.prompt_len, prefill_s.size()),
               prefill_tok_s, prefill_median_s * 1e3 / static_cast<double>(args.prompt_len), prefill_roofline,
               100.0 * prefill_tok_s / prefill_roofline, ">= 50%");
  fmt::print(
      "  decode: {:.1f} GB/s of weights vs read peak {:.1f} GB/s; prefill: {:.1f} GFLOP/s vs {} peak "
      "{:.1f} GFLOP/s (fp32 FMA peak {:.1f})\n",
      decode_bytes * decode_tok_s / 1e9, read_gbps, prefill_flops * prefill_tok_s / 1e9, matrix_peak_name,
      matrix_gflops, fma_gflops);
  const auto [mn, mx] = std::minmax_element(step_s.begin(), step_s.end());
  fmt::print(
      "  decode step spread: min {:.2f} ms, max {:.2f} ms (best step: {:.2f} tok/s, {:.0f}% of roofline)\n",
      *mn * 1e3, *mx * 1e3, 1.0 / *mn, 100.0 / *mn / decode_roofline);
  if (!paired_step_s.empty()) {
    std::vector<double> step_gbps;
    for (const double t : paired_step_s) step_gbps.push_back(decode_bytes / t * 1e-9);
    fmt::print(
        "  decode vs a read pass over as many bytes right after each step ({} pairs, {} threads): {:.1f} vs "
        "{:.1f} GB/s (medians); step / read of the same moment: median {:.0f}%\n",
        paired_step_s.size(), args.n_threads, ds::bench::median_of(step_gbps),
        ds::bench::median_of(paired_read_gbps), 100.0 * ds::bench::median_ratio(step_gbps, paired_read_gbps));
  }
  fmt::print("  logits of the context's last row and every decode step: FNV-1a {:016x}\n", logits_hash);
  fmt::print("  cpu share (CPU time / (wall x threads)): decode {:.0f}%, prefill {:.0f}%; at the end: {}\n",
             100.0 * decode_share, 100.0 * prefill_share,
             ds::bench::format_host_load(ds::bench::read_host_load()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) try {
  BenchArgs args;
  CLI::App app{"Decode and prefill throughput of a checkpoint against its machine roofline"};
  app.add_option("--model", args.model_dir, "checkpoint directory (deepinfer make-model --preset bench)")
      ->required();
  app.add_option("--threads", args.n_threads, "threads")->check(CLI::Range(1, 1024));
  app.add_option("--isa", args.isa_name, "kernel path (default: best the CPU has)");
  app.add_option("--prompt", args.prompt_len, "prefill prompt length")->check(CLI::Range(1, 1 << 20));
  app.add_option("--decode-steps", args.decode_steps, "timed decode steps (median)")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--paired-steps", args.paired_steps,
                 "decode steps each followed by a read pass of as many bytes (0: none): the decode bandwidth "
                 "as a fraction of the read rate of the same moment")
      ->check(CLI::Range(0, 100000));
  app.add_option("--prefill-runs", args.prefill_runs, "timed prefill runs (median; 0: skip)")
      ->check(CLI::Range(0, 100));
  app.add_option("--context", args.decode_prompt_len, "tokens in the sequence before the timed decode steps")
      ->check(CLI::Range(1, 1 << 20));
  app.add_flag("--quick", args.quick, "one prefill run, short warm-up, quick peaks");
  app.add_option("--seed", args.seed, "seed of the prompt tokens");
  app.add_option(
      "--numerics", args.numerics,
      "numerics options as on `deepinfer logits` (e.g. bf16_activations=on: prefill against the bf16 "
      "dot peak)");
  app.add_option("--decoder-replay-keep", args.decoder_replay_keep,
                 "V4.1: also time the prefill with decoder SWA bounded replay keeping this many tokens")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
  CLI11_PARSE(app, argc, argv);
  if (args.quick) args.prefill_runs = std::min(args.prefill_runs, 1);
  return run(args);
} catch (const std::exception& e) {
  fmt::print(stderr, "model_bench: {}\n", e.what());
  return 1;
}
