// spec_decode_bench: speculative decoding on a checkpoint with an MTP layer (docs/speculative.md).
// For each concurrency (1/4/16 by default) it runs the same chat prompts with speculation off
// (async scheduling on: the engine's default, and off: the loop speculation runs in) and on for each
// k, and prints per-user decode speed (tokens after the first / time from first to last token,
// averaged over the requests), aggregate output tok/s, mean acceptance length and acceptance by
// draft position, and the speedup as a ratio against the off (async) baseline of the same run.
// Greedy, fixed prompts; each cell is the median over --runs timed runs after one warm-up run.
//   spec_decode_bench --model DIR [--threads N] [--concurrency 1,4,16] [--k 1,3] [--max-tokens 128]
//                     [--prompts FILE (one prompt per line)] [--runs 3]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "bench_chat.h"
#include "engine/engine.h"
#include "engine/model_loader.h"
#include "kernels/isa.h"
#include "machine/bench_timing.h"
#include "token_timing.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace ds;

struct Args {
  std::string model_dir;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::string isa = "auto";
  std::vector<int> concurrency = {1, 4, 16};
  std::vector<int> k = {1, 3};
  int32_t max_tokens = 128;
  std::string prompts_file;
  int runs = 3;
  int64_t kv_cache_mib = 1024;
};

// Chat prompts of the kinds the demo model was trained on (docs/demo-model.md).
const std::vector<std::string> kDefaultPrompts = {
    "What is 17 + 25?",
    "Convert 3 kilometres to metres.",
    "Give me a JSON record for a book titled Dune by Frank Herbert, published in 1965.",
    "What is the capital of France?",
    "Define the word 'photosynthesis'.",
    "Hello! How are you today?",
    "What time is it in Tokyo? Use the clock tool.",
    "Write a short sentence about the sea.",
};

using bench::check;
using bench::encode_chat;

struct Cell {
  double per_user_tok_s = 0;  // mean over requests of (tokens - 1) / (last token - first token)
  double output_tok_s = 0;    // all tokens / wall
  EngineStats stats;          // counters of this run only (speculation fields)
};

Cell run_once(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int n, int32_t max_tokens) {
  std::vector<std::unique_ptr<bench::TokenTiming>> timings;
  const EngineStats before = engine.stats();
  const double t0 = now_seconds();
  for (int i = 0; i < n; ++i) {
    timings.push_back(std::make_unique<bench::TokenTiming>());
    Request r;
    r.prompt_tokens = prompts[static_cast<size_t>(i) % prompts.size()];
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = true;  // every request decodes max_tokens: equal work with and without drafts
    r.detokenize = false;
    check(engine.submit(std::move(r), timings.back()->sink()).status(), "submit");
  }
  for (auto& t : timings) t->wait();
  Cell c;
  const double wall = now_seconds() - t0;
  int64_t total = 0;
  double per_user_sum = 0;
  for (auto& t : timings) {
    total += t->n_tokens();
    per_user_sum += t->per_user_tok_s();
  }
  c.per_user_tok_s = per_user_sum / n;
  c.output_tok_s = static_cast<double>(total) / wall;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the engine publishes its last step
  const EngineStats after = engine.stats();
  c.stats.spec_decode_num_drafts = after.spec_decode_num_drafts - before.spec_decode_num_drafts;
  c.stats.spec_decode_num_draft_tokens =
      after.spec_decode_num_draft_tokens - before.spec_decode_num_draft_tokens;
  c.stats.spec_decode_num_accepted_tokens =
      after.spec_decode_num_accepted_tokens - before.spec_decode_num_accepted_tokens;
  c.stats.spec_decode_num_accepted_tokens_per_pos = after.spec_decode_num_accepted_tokens_per_pos;
  for (size_t j = 0; j < before.spec_decode_num_accepted_tokens_per_pos.size(); ++j)
    c.stats.spec_decode_num_accepted_tokens_per_pos[j] -= before.spec_decode_num_accepted_tokens_per_pos[j];
  return c;
}

Cell median_cell(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int n, const Args& a) {
  run_once(engine, prompts, n, a.max_tokens);  // warm-up
  std::vector<Cell> cells;
  for (int r = 0; r < a.runs; ++r) cells.push_back(run_once(engine, prompts, n, a.max_tokens));
  std::sort(cells.begin(), cells.end(),
            [](const Cell& x, const Cell& y) { return x.per_user_tok_s < y.per_user_tok_s; });
  return cells[cells.size() / 2];
}

std::unique_ptr<Engine> make_engine(ModelRunner& model, const Tokenizer& tok, int max_running, bool async,
                                    int k, const Args& a) {
  EngineConfig cfg;
  cfg.scheduler.max_running = max_running;
  cfg.kv_cache_bytes = a.kv_cache_mib << 20;
  cfg.async_scheduling = async;
  cfg.prefix_hash_seed = 7;
  if (k > 0) {
    cfg.speculative.method = SpeculativeMethod::mtp;
    cfg.speculative.num_speculative_tokens = k;
  }
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, model, &tok);
  check(e.status(), "Engine::create");
  return std::move(e).value();
}

std::string acceptance_by_position(const EngineStats& s) {
  std::string out;
  for (size_t j = 0; j < s.spec_decode_num_accepted_tokens_per_pos.size(); ++j) {
    const double rate = s.spec_decode_num_drafts > 0
                            ? static_cast<double>(s.spec_decode_num_accepted_tokens_per_pos[j]) /
                                  static_cast<double>(s.spec_decode_num_drafts)
                            : 0.0;
    out += fmt::format("{}{:.2f}", j == 0 ? "" : " ", rate);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Speculative decoding (MTP): per-user decode speed and acceptance, on vs off"};
  app.add_option("--model", a.model_dir, "Checkpoint directory (with an MTP layer)")->required();
  app.add_option("--threads", a.n_threads, "Model threads")->capture_default_str();
  app.add_option("--isa", a.isa, "auto | reference | avx2 | avx512")->capture_default_str();
  app.add_option("--concurrency", a.concurrency, "Concurrent requests to sweep")->delimiter(',');
  app.add_option("--k", a.k, "num_speculative_tokens values to sweep")->delimiter(',');
  app.add_option("--max-tokens", a.max_tokens, "Generated tokens per request")->capture_default_str();
  app.add_option("--prompts", a.prompts_file, "Prompts, one per line (default: built-in chat prompts)");
  app.add_option("--runs", a.runs, "Timed runs per cell (median)")->capture_default_str();
  app.add_option("--kv-cache-mib", a.kv_cache_mib, "KV cache budget")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    ModelOptions mo;
    const std::optional<Isa> isa = a.isa == "auto" ? std::optional<Isa>(best_isa()) : isa_from_name(a.isa);
    if (!isa || !isa_supported(*isa)) throw std::runtime_error("--isa: unsupported " + a.isa);
    mo.isa = *isa;
    mo.n_threads = a.n_threads;
    mo.max_seq_len = 4096;
    Result<std::unique_ptr<ModelRunner>> model = load_model(a.model_dir, mo);
    check(model.status(), "load");
    Result<Tokenizer> tok = Tokenizer::load(a.model_dir);
    check(tok.status(), "tokenizer");
    std::vector<std::string> texts = kDefaultPrompts;
    if (!a.prompts_file.empty()) {
      std::ifstream in(a.prompts_file);
      if (!in) throw std::runtime_error(a.prompts_file + ": cannot open");
      texts.clear();
      for (std::string line; std::getline(in, line);)
        if (!line.empty()) texts.push_back(line);
    }
    std::vector<std::vector<int32_t>> prompts;
    for (const std::string& t : texts) prompts.push_back(encode_chat(*tok, t));
    fmt::print("spec_decode_bench: {} ({} threads), {} prompts, {} tokens each, greedy, median of {} runs\n",
               a.model_dir, a.n_threads, prompts.size(), a.max_tokens, a.runs);
    fmt::print("{:>5} {:>14} {:>14} {:>12} {:>10} {:>10}  {}\n", "users", "mode", "tok/s/user", "tok/s total",
               "vs off", "accept len", "acceptance by position");
    for (const int n : a.concurrency) {
      double base = 0;
      for (const int async : {1, 0}) {
        auto engine = make_engine(**model, *tok, n, async != 0, 0, a);
        const Cell c = median_cell(*engine, prompts, n, a);
        if (async) base = c.per_user_tok_s;
        fmt::print("{:>5} {:>14} {:>14.1f} {:>12.1f} {:>9.2f}x {:>10}\n", n,
                   async ? "off (async)" : "off (sync)", c.per_user_tok_s, c.output_tok_s,
                   base > 0 ? c.per_user_tok_s / base : 0.0, "-");
      }
      for (const int k : a.k) {
        auto engine = make_engine(**model, *tok, n, false, k, a);
        const Cell c = median_cell(*engine, prompts, n, a);
        const EngineStats& s = c.stats;
        const double len = s.spec_decode_num_drafts > 0
                               ? 1.0 + static_cast<double>(s.spec_decode_num_accepted_tokens) /
                                           static_cast<double>(s.spec_decode_num_drafts)
                               : 0.0;
        fmt::print("{:>5} {:>14} {:>14.1f} {:>12.1f} {:>9.2f}x {:>10.2f}  {}\n", n,
                   fmt::format("mtp k={}", k), c.per_user_tok_s, c.output_tok_s,
                   base > 0 ? c.per_user_tok_s / base : 0.0, len, acceptance_by_position(s));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spec_decode_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
