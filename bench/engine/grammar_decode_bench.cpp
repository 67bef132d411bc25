// grammar_decode_bench: what structured output costs a decode step (docs/grammar.md, issue 12's
// "constrained vs unconstrained throughput"). On a checkpoint with a tokenizer (the demo model, or a
// generated preset), for each concurrency (1 and 16 by default) it runs the same chat prompts
//   off    no request constrained (the baseline of the same run),
//   all    every request under a JSON Schema,
//   mixed  every other request under it,
// and prints aggregate output tok/s and per-user decode speed, with the ratio to `off`; for `mixed`
// also the unconstrained rows' own per-user speed (they must not slow down). The schema is an
// array of at least 200 small objects, so no request completes its grammar within --max-tokens and
// every cell decodes the same number of tokens; each cell is the median over --runs timed runs
// (the three modes interleaved run by run) after one warm-up run (the warm-up also fills the grammar's
// per-state mask cache; the cold first run is printed apart).
// With --jump-forward also `sync` (all constrained, synchronous steps) and `jf` (the same with
// EngineConfig::jump_forward: forced tokens appended without sampling, counted as output tokens).
//   grammar_decode_bench --model DIR [--threads N] [--concurrency 1,16] [--max-tokens 64] [--runs 3]
//                        [--jump-forward]
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "bench_chat.h"
#include "engine/engine.h"
#include "engine/model_loader.h"
#include "grammar/grammar_compiler.h"
#include "kernels/isa.h"
#include "token_timing.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace ds;

constexpr const char* kSchema = R"({"type":"array","minItems":200,"items":{"type":"object",
  "properties":{"name":{"type":"string","maxLength":16},"n":{"type":"integer"},"ok":{"type":"boolean"}},
  "required":["name","n","ok"],"additionalProperties":false}})";

struct Args {
  std::string model_dir;
  int n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> concurrency = {1, 16};
  int32_t max_tokens = 64;
  int runs = 3;
  int64_t kv_cache_mib = 512;
  bool jump_forward = false;  // also `all` on a synchronous engine, with and without jump-forward
};

using bench::check;
using bench::encode_chat;

enum class Mode { off, all, mixed };

struct Cell {
  double output_tok_s = 0;
  double per_user_tok_s = 0;       // mean over requests of (tokens - 1) / (last - first token)
  double free_per_user_tok_s = 0;  // the same over the unconstrained requests only
  int64_t tokens = 0;
};

Cell run_once(Engine& engine, const std::vector<int32_t>& prompt, int n, Mode mode,
              const std::shared_ptr<const grammar::CompiledGrammar>& grammar, int32_t max_tokens) {
  std::vector<std::unique_ptr<bench::TokenTiming>> timings;
  std::vector<bool> constrained;
  const double t0 = now_seconds();
  for (int i = 0; i < n; ++i) {
    timings.push_back(std::make_unique<bench::TokenTiming>());
    Request r;
    r.prompt_tokens = prompt;
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = true;
    r.detokenize = false;
    constrained.push_back(mode == Mode::all || (mode == Mode::mixed && i % 2 == 0));
    if (constrained.back()) r.grammar = grammar;
    check(engine.submit(std::move(r), timings.back()->sink()).status(), "submit");
  }
  for (auto& t : timings) t->wait();
  Cell c;
  const double wall = now_seconds() - t0;
  double sum = 0, free_sum = 0;
  int n_free = 0;
  for (size_t i = 0; i < timings.size(); ++i) {
    c.tokens += timings[i]->n_tokens();
    const double speed = timings[i]->per_user_tok_s();
    sum += speed;
    if (!constrained[i]) {
      free_sum += speed;
      ++n_free;
    }
  }
  c.output_tok_s = static_cast<double>(c.tokens) / wall;
  c.per_user_tok_s = sum / n;
  c.free_per_user_tok_s = n_free > 0 ? free_sum / n_free : 0.0;
  return c;
}

std::unique_ptr<Engine> make_engine(ModelRunner& model, const Tokenizer& tok, int max_running, const Args& a,
                                    bool sync = false, bool jump_forward = false) {
  EngineConfig cfg;
  cfg.async_scheduling = !sync;
  cfg.jump_forward = jump_forward;
  cfg.scheduler.max_running = max_running;
  cfg.kv_cache_bytes = a.kv_cache_mib << 20;
  cfg.prefix_hash_seed = 7;
  Result<std::unique_ptr<Engine>> e = Engine::create(cfg, model, &tok);
  check(e.status(), "Engine::create");
  return std::move(e).value();
}

std::string ratio(double x, double base) { return base > 0 ? fmt::format("{:.3f}x", x / base) : "-"; }

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Structured output: constrained vs unconstrained decode throughput"};
  app.add_option("--model", a.model_dir, "Checkpoint directory with its tokenizer")->required();
  app.add_option("--threads", a.n_threads, "Model threads")->capture_default_str();
  app.add_option("--concurrency", a.concurrency, "Concurrent requests to sweep")->delimiter(',');
  app.add_option("--max-tokens", a.max_tokens, "Generated tokens per request")->capture_default_str();
  app.add_option("--runs", a.runs, "Timed runs per cell (median)")->capture_default_str();
  app.add_option("--kv-cache-mib", a.kv_cache_mib, "KV cache budget")->capture_default_str();
  app.add_flag("--jump-forward", a.jump_forward,
               "Also every request constrained on a synchronous engine, without and with jump-forward");
  CLI11_PARSE(app, argc, argv);
  try {
    ModelOptions mo;
    mo.isa = best_isa();
    mo.n_threads = a.n_threads;
    mo.max_seq_len = 1024;
    Result<std::unique_ptr<ModelRunner>> model = load_model(a.model_dir, mo);
    check(model.status(), "load");
    Result<Tokenizer> tok = Tokenizer::load(a.model_dir);
    check(tok.status(), "tokenizer");
    const std::vector<int32_t> prompt = encode_chat(*tok, "List the records as JSON.");
    fmt::print("grammar_decode_bench: {} ({} threads, isa {}), {} tokens per request, greedy, median of {}\n",
               a.model_dir, a.n_threads, isa_name(mo.isa), a.max_tokens, a.runs);
    fmt::print("{:>5} {:>6} {:>12} {:>9} {:>11} {:>9} {:>16} {:>9}\n", "users", "mode", "tok/s total",
               "vs off", "tok/s/user", "vs off", "free rows/user", "vs off");
    for (const int n : a.concurrency) {
      auto engine = make_engine(**model, *tok, n, a);
      grammar::GrammarSpec spec;
      spec.kind = grammar::GrammarSpec::Kind::json_schema;
      spec.source = kSchema;
      const double compile_t0 = now_seconds();
      Result<std::shared_ptr<const grammar::CompiledGrammar>> g = engine->compile_grammar(spec);
      check(g.status(), "compile_grammar");
      const double compile_ms = (now_seconds() - compile_t0) * 1e3;
      const Cell cold = run_once(*engine, prompt, n, Mode::all, *g, a.max_tokens);
      fmt::print(
          "{:>5} {:>6} {:>12.1f}   (first run, grammar compiled in {:.1f} ms incl. the vocabulary trie)\n", n,
          "cold", cold.output_tok_s, compile_ms);
      // Modes interleaved run by run, so that a change of the machine's load hits all of them alike.
      // With --jump-forward: `all` again on a synchronous engine (jump-forward steps are synchronous)
      // without (`sync`) and with it (`jf`); their outputs count forced tokens as output tokens.
      struct Row {
        const char* name;
        Engine* engine;
        Mode mode;
        std::shared_ptr<const grammar::CompiledGrammar> grammar;
      };
      std::vector<Row> rows = {{"off", engine.get(), Mode::off, *g},
                               {"all", engine.get(), Mode::all, *g},
                               {"mixed", engine.get(), Mode::mixed, *g}};
      std::unique_ptr<Engine> sync_engine, jf_engine;
      if (a.jump_forward) {
        sync_engine = make_engine(**model, *tok, n, a, /*sync=*/true);
        jf_engine = make_engine(**model, *tok, n, a, /*sync=*/true, /*jump_forward=*/true);
        for (Engine* e : {sync_engine.get(), jf_engine.get()}) {
          Result<std::shared_ptr<const grammar::CompiledGrammar>> eg = e->compile_grammar(spec);
          check(eg.status(), "compile_grammar");
          rows.push_back({e == jf_engine.get() ? "jf" : "sync", e, Mode::all, *eg});
        }
      }
      for (const Row& row : rows)
        run_once(*row.engine, prompt, n, row.mode, row.grammar, a.max_tokens);  // warm-up
      const int64_t jf_before = jf_engine ? jf_engine->stats().jump_forward_tokens_total : 0;
      const int64_t gen_before = jf_engine ? jf_engine->stats().generation_tokens_total : 0;
      std::vector<EngineStats> stats_before;
      for (const Row& row : rows) stats_before.push_back(row.engine->stats());
      std::vector<std::vector<Cell>> cells(rows.size());
      for (int r = 0; r < a.runs; ++r)
        for (size_t m = 0; m < rows.size(); ++m)
          cells[m].push_back(
              run_once(*rows[m].engine, prompt, n, rows[m].mode, rows[m].grammar, a.max_tokens));
      Cell base;
      for (size_t m = 0; m < rows.size(); ++m) {
        std::sort(cells[m].begin(), cells[m].end(),
                  [](const Cell& x, const Cell& y) { return x.output_tok_s < y.output_tok_s; });
        const Cell c = cells[m][cells[m].size() / 2];
        const Mode mode = rows[m].mode;
        if (m == 0) base = c;
        if (c.tokens != static_cast<int64_t>(n) * a.max_tokens)
          fmt::print("  note: {} tokens decoded, expected {}\n", c.tokens, int64_t{n} * a.max_tokens);
        const bool has_free = mode == Mode::mixed && n > 1;
        fmt::print("{:>5} {:>6} {:>12.1f} {:>9} {:>11.1f} {:>9} {:>16} {:>9}\n", n, rows[m].name,
                   c.output_tok_s, ratio(c.output_tok_s, base.output_tok_s), c.per_user_tok_s,
                   ratio(c.per_user_tok_s, base.per_user_tok_s),
                   has_free ? fmt::format("{:.1f}", c.free_per_user_tok_s) : "-",
                   has_free ? ratio(c.free_per_user_tok_s, base.free_per_user_tok_s) : "-");
      }
      for (size_t m = 3; m < rows.size(); ++m) {  // sync and jf: where the time went
        const EngineStats st = rows[m].engine->stats();
        const int64_t steps = st.n_steps - stats_before[m].n_steps;
        const double forward_s =
            static_cast<double>(st.forward_ns_total - stats_before[m].forward_ns_total) * 1e-9;
        const double gap_s =
            static_cast<double>(st.step_gap_ns_total - stats_before[m].step_gap_ns_total) * 1e-9;
        fmt::print("  {}: {} steps, forward {:.2f} s ({:.2f} ms a step), between steps {:.2f} s\n",
                   rows[m].name, steps, forward_s,
                   steps > 0 ? forward_s * 1e3 / static_cast<double>(steps) : 0.0, gap_s);
      }
      if (jf_engine) {
        const EngineStats st = jf_engine->stats();
        fmt::print("  jf: {} of {} output tokens appended without sampling in the timed runs\n",
                   st.jump_forward_tokens_total - jf_before, st.generation_tokens_total - gen_before);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grammar_decode_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
