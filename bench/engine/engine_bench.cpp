// engine_bench: the Engine's serving numbers on a checkpoint (or the fake model).
//   1. output tok/s vs concurrency (1/4/16/64 by default): aggregate throughput grows with
//      concurrency because a decode step reads the weights once for all its rows; beside the
//      end-to-end figure (prefill included) the decode-only rate: tokens of the steps with only
//      decode rows over those steps' wall time (llama-batched-bench's S_TG);
//   2. TTFT of a request with a 2,000-token prefix, cold and with the prefix in the cache;
//   3. scheduling overhead per step with async scheduling on and off (engine-thread time during
//      which the model sits idle between two forwards).
// Fixed seeds; each cell is the median over --runs runs after one warm-up run.
//   engine_bench --model DIR [--threads N] [--isa auto] [--concurrency 1,4,16,64] [--max-tokens 32]
//                [--prompt-tokens 64] [--prefix-tokens 2000] [--runs 3] [--decoder-replay-keep K]
//                [--sections concurrency,ttft,async]
//   --decoder-replay-keep K: V4.1 decoder SWA bounded replay on (model/decoder_replay.h)
//   engine_bench --fake [--fake-step-us 2000]   (no checkpoint: a fake model that sleeps per step)
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "engine/engine.h"
#include "engine/model_loader.h"
#include "engine/testing/fake_model_runner.h"
#include "kernels/isa.h"
#include "machine/bench_timing.h"

namespace {

using namespace ds;

struct Args {
  std::string model_dir;
  bool fake = false;
  int64_t fake_step_us = 2000;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string isa = "auto";
  std::vector<int> concurrency = {1, 4, 16, 64};
  int32_t max_tokens = 32;
  int64_t decoder_replay_keep = 0;  // V4.1: > 0 turns decoder replay on
  int32_t prompt_tokens = 64;
  int32_t prefix_tokens = 2000;
  int runs = 3;
  int64_t kv_cache_mib = 1024;
  std::vector<std::string> sections = {"concurrency", "ttft", "async"};
};

std::vector<int32_t> random_tokens(int64_t n, int vocab, uint64_t seed) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& id : t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab));
  }
  return t;
}

void check(const Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(fmt::format("{}: {}", what, s.to_string()));
}

std::unique_ptr<Engine> make_engine(ModelRunner& model, int32_t max_running, bool async, bool prefix_caching,
                                    const Args& a) {
  EngineConfig cfg;
  cfg.scheduler.max_running = max_running;
  cfg.scheduler.max_step_tokens = 2048;
  cfg.kv_cache_bytes = a.kv_cache_mib << 20;
  cfg.async_scheduling = async;
  cfg.enable_prefix_caching = prefix_caching;
  cfg.prefix_hash_seed = 7;
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, model, nullptr);
  check(e.status(), "Engine::create");
  return std::move(e).value();
}

Request bench_request(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_tokens = std::move(prompt);
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;  // every request generates exactly max_tokens
  r.detokenize = false;
  return r;
}

struct LoadResult {
  double wall_s = 0;
  double output_tok_s = 0;
  double mean_ttft_ms = 0;
  double gap_us_per_step = 0;
  double forward_ms_per_step = 0;
  double decode_tok_s = 0;  // decode-only steps (EngineStats::decode_only_*)
  int64_t steps = 0;
};

// n requests submitted at once; waits for all of them.
LoadResult run_load(Engine& engine, int n, const Args& a, int vocab, uint64_t seed) {
  const EngineStats before = engine.stats();
  std::vector<RequestStream> streams(static_cast<size_t>(n));
  const double t0 = now_seconds();
  for (int i = 0; i < n; ++i) {
    Result<RequestId> id = engine.submit(
        bench_request(random_tokens(a.prompt_tokens, vocab, seed * 1000 + static_cast<uint64_t>(i)),
                      a.max_tokens),
        streams[static_cast<size_t>(i)].sink());
    check(id.status(), "submit");
  }
  int64_t tokens = 0;
  double ttft_sum_ms = 0;
  for (RequestStream& s : streams) {
    const TokenEvent e = s.collect();
    check(e.error, "request");
    tokens += static_cast<int64_t>(e.tokens.size());
    ttft_sum_ms += std::chrono::duration<double, std::milli>(e.first_token_at - e.queued_at).count();
  }
  LoadResult r;
  r.wall_s = now_seconds() - t0;
  r.output_tok_s = static_cast<double>(tokens) / r.wall_s;
  r.mean_ttft_ms = ttft_sum_ms / n;
  // Let the engine publish the last step's counters.
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const EngineStats after = engine.stats();
  r.steps = after.n_steps - before.n_steps;
  const int64_t gaps = after.n_step_gaps - before.n_step_gaps;
  r.gap_us_per_step =
      gaps > 0 ? 1e-3 * static_cast<double>(after.step_gap_ns_total - before.step_gap_ns_total) / gaps : 0;
  r.forward_ms_per_step =
      r.steps > 0 ? 1e-6 * static_cast<double>(after.forward_ns_total - before.forward_ns_total) / r.steps
                  : 0;
  const int64_t decode_ns = after.decode_only_ns_total - before.decode_only_ns_total;
  r.decode_tok_s =
      decode_ns > 0
          ? 1e9 * static_cast<double>(after.decode_only_tokens_total - before.decode_only_tokens_total) /
                static_cast<double>(decode_ns)
          : 0;
  return r;
}

template <class Fn>
LoadResult median_load(int runs, Fn&& fn) {
  fn(0);  // warm-up
  std::vector<LoadResult> all;
  for (int i = 1; i <= runs; ++i) all.push_back(fn(static_cast<uint64_t>(i)));
  std::sort(all.begin(), all.end(),
            [](const LoadResult& x, const LoadResult& y) { return x.output_tok_s < y.output_tok_s; });
  return all[all.size() / 2];
}

void bench_concurrency(ModelRunner& model, const Args& a, int vocab) {
  fmt::print(
      "\n== output tok/s vs concurrency (prompt {} tokens, {} generated each, async on, median of {}) ==\n",
      a.prompt_tokens, a.max_tokens, a.runs);
  fmt::print("{:>11} {:>12} {:>10} {:>10} {:>8} {:>12} {:>10} {:>12} {:>10}\n", "concurrency", "output tok/s",
             "vs c=1", "TTFT ms", "steps", "fwd ms/step", "wall s", "decode tok/s", "vs c=1");
  double base = 0, decode_base = 0;
  for (int c : a.concurrency) {
    std::unique_ptr<Engine> engine = make_engine(model, std::max(c, 1), true, false, a);
    const LoadResult r =
        median_load(a.runs, [&](uint64_t seed) { return run_load(*engine, c, a, vocab, seed); });
    if (base == 0) base = r.output_tok_s;
    if (decode_base == 0) decode_base = r.decode_tok_s;
    fmt::print("{:>11} {:>12.1f} {:>9.2f}x {:>10.1f} {:>8} {:>12.2f} {:>10.2f} {:>12.1f} {:>9.2f}x\n", c,
               r.output_tok_s, r.output_tok_s / base, r.mean_ttft_ms, r.steps, r.forward_ms_per_step,
               r.wall_s, r.decode_tok_s, decode_base > 0 ? r.decode_tok_s / decode_base : 0.0);
  }
}

double ttft_ms(Engine& engine, std::vector<int32_t> prompt, int64_t* cached) {
  RequestStream s;
  check(engine.submit(bench_request(std::move(prompt), 1), s.sink()).status(), "submit");
  const TokenEvent e = s.collect();
  check(e.error, "request");
  if (cached != nullptr) *cached = e.usage.cached_prompt_tokens;
  return std::chrono::duration<double, std::milli>(e.first_token_at - e.queued_at).count();
}

void bench_prefix_ttft(ModelRunner& model, const Args& a, int vocab) {
  fmt::print("\n== TTFT with a {}-token shared prefix (+16 own tokens), median of {} ==\n", a.prefix_tokens,
             a.runs);
  std::vector<double> cold, warm;
  int64_t cached = 0;
  std::unique_ptr<Engine> engine = make_engine(model, 4, true, true, a);
  for (int run = 0; run <= a.runs; ++run) {
    std::vector<int32_t> prefix = random_tokens(a.prefix_tokens, vocab, 5000 + static_cast<uint64_t>(run));
    std::vector<int32_t> first = prefix, second = prefix;
    const std::vector<int32_t> s1 = random_tokens(16, vocab, 6000 + static_cast<uint64_t>(run));
    const std::vector<int32_t> s2 = random_tokens(16, vocab, 7000 + static_cast<uint64_t>(run));
    first.insert(first.end(), s1.begin(), s1.end());
    second.insert(second.end(), s2.begin(), s2.end());
    const double c = ttft_ms(*engine, first, nullptr);   // a new prefix: computed in full
    const double w = ttft_ms(*engine, second, &cached);  // same prefix: served from the cache
    if (run == 0) continue;                              // warm-up
    cold.push_back(c);
    warm.push_back(w);
  }
  const double cold_ms = bench::median_of(cold);
  const double warm_ms = bench::median_of(warm);
  fmt::print("{:>22} {:>10} {:>15}\n", "case", "TTFT ms", "cached tokens");
  fmt::print("{:>22} {:>10.1f} {:>15}\n", "cold (no cached prefix)", cold_ms, 0);
  fmt::print("{:>22} {:>10.1f} {:>15}\n", "cached prefix", warm_ms, cached);
  fmt::print("speed-up: {:.1f}x\n", warm_ms > 0 ? cold_ms / warm_ms : 0.0);
}

void bench_async(ModelRunner& model, const Args& a, int vocab) {
  const int c = std::min(
      16, a.concurrency.empty() ? 16 : *std::max_element(a.concurrency.begin(), a.concurrency.end()));
  fmt::print("\n== scheduling overhead per step, {} concurrent requests, median of {} ==\n", c, a.runs);
  fmt::print("{:>6} {:>22} {:>12} {:>12}\n", "async", "model idle us/step", "fwd ms/step", "output tok/s");
  for (bool async : {false, true}) {
    std::unique_ptr<Engine> engine = make_engine(model, c, async, false, a);
    const LoadResult r =
        median_load(a.runs, [&](uint64_t seed) { return run_load(*engine, c, a, vocab, seed); });
    fmt::print("{:>6} {:>22.1f} {:>12.2f} {:>12.1f}\n", async ? "on" : "off", r.gap_us_per_step,
               r.forward_ms_per_step, r.output_tok_s);
  }
}

int run(const Args& a) {
  std::unique_ptr<ModelRunner> model;
  std::string what;
  if (a.fake) {
    testing::FakeModelOptions fo;
    fo.vocab_size = 4096;  // small rows: the sleep, not the fake logits, is the step time
    fo.max_seq_len = 8192;
    fo.step_sleep_us = a.fake_step_us;
    model = std::make_unique<testing::FakeModelRunner>(fo);
    what = fmt::format("fake model, {} us per forward", a.fake_step_us);
  } else {
    ModelOptions mo;
    const std::optional<Isa> isa = a.isa == "auto" ? std::optional<Isa>(best_isa()) : isa_from_name(a.isa);
    if (!isa || !isa_supported(*isa)) throw std::runtime_error("--isa: unsupported " + a.isa);
    mo.isa = *isa;
    mo.n_threads = a.n_threads;
    if (a.decoder_replay_keep > 0)
      mo.decoder_replay = {.compact = true, .keep_tokens = a.decoder_replay_keep};
    mo.max_seq_len = std::max<int64_t>(a.prefix_tokens + 16 + 1, a.prompt_tokens + a.max_tokens);
    Result<std::unique_ptr<ModelRunner>> m = load_model(a.model_dir, mo);  // V3 or V4
    check(m.status(), "load");
    model = std::move(m).value();
    what =
        fmt::format("{} (isa {}, {} threads{})", a.model_dir, isa_name(*isa), a.n_threads,
                    a.decoder_replay_keep > 0 ? fmt::format(", decoder replay keep {}", a.decoder_replay_keep)
                                              : std::string());
  }
  // Sample only ids that every vocabulary has (the model's; no tokenizer here).
  const int vocab = std::min(model->config().vocab_size, 120000);
  fmt::print("engine_bench: {}\n", what);
  auto wanted = [&](const char* name) {
    return std::find(a.sections.begin(), a.sections.end(), name) != a.sections.end();
  };
  if (wanted("concurrency")) bench_concurrency(*model, a, vocab);
  if (wanted("ttft")) bench_prefix_ttft(*model, a, vocab);
  if (wanted("async")) bench_async(*model, a, vocab);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Engine throughput, TTFT with a cached prefix, and async scheduling overhead"};
  app.add_option("--model", a.model_dir, "Checkpoint directory");
  app.add_flag("--fake", a.fake, "Use the fake model (no checkpoint)");
  app.add_option("--fake-step-us", a.fake_step_us, "Fake model: sleep per forward")->capture_default_str();
  app.add_option("--threads", a.n_threads, "Model threads")->capture_default_str();
  app.add_option("--isa", a.isa, "auto | reference | avx2 | avx512")->capture_default_str();
  app.add_option("--concurrency", a.concurrency, "Concurrent requests to sweep")->delimiter(',');
  app.add_option("--max-tokens", a.max_tokens, "Generated tokens per request")->capture_default_str();
  app.add_option("--prompt-tokens", a.prompt_tokens, "Prompt tokens per request")->capture_default_str();
  app.add_option("--prefix-tokens", a.prefix_tokens, "Shared prefix length for the TTFT case")
      ->capture_default_str();
  app.add_option("--runs", a.runs, "Timed runs per cell (median)")->capture_default_str();
  app.add_option("--kv-cache-mib", a.kv_cache_mib, "KV cache budget")->capture_default_str();
  app.add_option("--decoder-replay-keep", a.decoder_replay_keep,
                 "V4.1: decoder SWA bounded replay keeping this many prompt tokens (0: off)");
  app.add_option("--sections", a.sections, "Parts to run: concurrency, ttft, async (default all)")
      ->delimiter(',')
      ->check(CLI::IsMember({"concurrency", "ttft", "async"}));
  CLI11_PARSE(app, argc, argv);
  if (a.model_dir.empty() && !a.fake) {
    std::fprintf(stderr, "engine_bench: --model DIR or --fake is required\n");
    return 2;
  }
  if (a.runs < 1 || a.max_tokens < 1 || a.prompt_tokens < 1 || a.prefix_tokens < 1) {
    std::fprintf(stderr,
                 "engine_bench: --runs, --max-tokens, --prompt-tokens, --prefix-tokens must be >= 1\n");
    return 2;
  }
  try {
    return run(a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "engine_bench: error: %s\n", e.what());
    return 1;
  }
}
