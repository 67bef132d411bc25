// spec_decode_bench: speculative decoding on a checkpoint with an MTP layer (docs/speculative.md).
// For each concurrency n (1/4/16 by default; max_running = n, every prompt at least once, the rest
// queued) it runs the same chat prompts with speculation off and
// on for each k at a fixed k (adaptive off), then with the engine's policy choosing up to the
// largest k ("auto"), and prints per-user decode speed (tokens after the first / time from first to
// last token, averaged over the requests), aggregate output tok/s, mean acceptance length and
// acceptance by draft position, and the speedup as a ratio against the off baseline of the same run
// (async scheduling in every mode, or --sync: the synchronous loop in every mode). Greedy unless
// --temperature; fixed prompts. --runs rounds run every mode in turn (fresh engine, one warm-up run
// each); tok/s are medians over rounds and "vs off" the median of each round's ratio to that round's
// off run. --stop-at-eos lets replies end at EOS
// (acceptance on reply tokens only) instead of decoding max_tokens past it.
//   spec_decode_bench --model DIR [--threads N] [--concurrency 1,4,16] [--k 1,3] [--max-tokens 128]
//                     [--prompts FILE (one prompt per line)] [--runs 3] [--no-auto] [--stop-at-eos]
//                     [--temperature T] [--draft-sampling greedy|sampled] [--frequency-penalty F]
//                     [--json-schema SCHEMA (every request constrained: structured output under drafts)]
//                     [--sync] [--bf16-activations (--numerics bf16_activations=on: vdpbf16ps GEMVs)]
#include <fmt/format.h>
#include <sys/resource.h>
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
#include "engine/speculation_costs.h"
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
  bool no_auto = false;
  bool costs = false;
  bool stop_at_eos = false;
  float temperature = 0.0f;
  std::string draft_sampling = "greedy";
  int32_t draft_vocab = -1;
  float frequency_penalty = 0.0f;
  std::string json_schema;        // every request constrained to it (empty: unconstrained)
  bool bf16_activations = false;  // ModelOptions::bf16_activations (docs/numerics.md)
  bool sync = false;              // EngineConfig::async_scheduling = false in every mode
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

// User + system CPU time of the whole process: on a host shared with other work, CPU time per token
// is what the engine itself spent, whatever the other processes took of the cores meanwhile.
double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}
using bench::encode_chat;

struct Cell {
  double per_user_tok_s = 0;   // mean over requests of (tokens - 1) / (last token - first token)
  double cpu_s_per_token = 0;  // process CPU time (all threads) per output token
  int64_t n_tokens = 0;        // output tokens of the run
  double output_tok_s = 0;     // all tokens / wall
  EngineStats stats;           // counters of this run only (speculation fields)
};

Cell run_once(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int n, const Args& a) {
  const int32_t max_tokens = a.max_tokens;
  std::vector<std::unique_ptr<bench::TokenTiming>> timings;
  const EngineStats before = engine.stats();
  const double cpu0 = process_cpu_seconds();
  const double t0 = now_seconds();
  // Every prompt at least once: with fewer users than prompts the rest queue (max_running = n).
  const int n_requests = std::max(n, static_cast<int>(prompts.size()));
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  if (!a.json_schema.empty()) {
    grammar::GrammarSpec spec;
    spec.kind = grammar::GrammarSpec::Kind::json_schema;
    spec.source = a.json_schema;
    Result<std::shared_ptr<const grammar::CompiledGrammar>> compiled = engine.compile_grammar(spec);
    check(compiled.status(), "compile --json-schema");
    grammar = *compiled;
  }
  for (int i = 0; i < n_requests; ++i) {
    timings.push_back(std::make_unique<bench::TokenTiming>());
    Request r;
    r.prompt_tokens = prompts[static_cast<size_t>(i) % prompts.size()];
    r.stop.max_tokens = max_tokens;
    r.stop.ignore_eos = !a.stop_at_eos;  // by default every request decodes max_tokens
    r.sampling.temperature = a.temperature;
    r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    r.sampling.frequency_penalty = a.frequency_penalty;
    r.grammar = grammar;
    r.detokenize = false;
    check(engine.submit(std::move(r), timings.back()->sink()).status(), "submit");
  }
  for (auto& t : timings) t->wait();
  Cell c;
  const double wall = now_seconds() - t0;
  const double cpu = process_cpu_seconds() - cpu0;
  int64_t total = 0;
  double per_user_sum = 0;
  for (auto& t : timings) {
    total += t->n_tokens();
    per_user_sum += t->per_user_tok_s();
  }
  c.per_user_tok_s = per_user_sum / n_requests;
  c.output_tok_s = static_cast<double>(total) / wall;
  c.cpu_s_per_token = total > 0 ? cpu / static_cast<double>(total) : 0.0;
  c.n_tokens = total;
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

std::unique_ptr<Engine> make_engine(ModelRunner& model, const Tokenizer& tok, int max_running, int k,
                                    bool adaptive, const Args& a) {
  EngineConfig cfg;
  cfg.scheduler.max_running = max_running;
  cfg.kv_cache_bytes = a.kv_cache_mib << 20;
  cfg.prefix_hash_seed = 7;
  cfg.async_scheduling = !a.sync;
  if (k > 0) {
    cfg.speculative.method = SpeculativeMethod::mtp;
    cfg.speculative.num_speculative_tokens = k;
    cfg.speculative.adaptive = adaptive;
    cfg.speculative.draft_vocab = a.draft_vocab;
    cfg.speculative.draft_sampling =
        a.draft_sampling == "sampled" ? DraftSampling::sampled : DraftSampling::greedy;
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
  app.add_flag("--no-auto", a.no_auto, "Skip the adaptive (policy) row");
  app.add_flag("--bf16-activations", a.bf16_activations,
               "Round linear inputs to bf16 (--numerics bf16_activations=on: AVX512-BF16 dot products)");
  app.add_flag("--sync", a.sync, "Every mode with the synchronous step loop (no async scheduling)");
  app.add_flag("--costs", a.costs, "Print the cost curve the policy measures at engine start, then exit");
  app.add_flag("--stop-at-eos", a.stop_at_eos, "Stop replies at EOS (default: decode max_tokens)");
  app.add_option("--temperature", a.temperature, "Sampling temperature (0 = greedy)")->capture_default_str();
  app.add_option("--draft-sampling", a.draft_sampling, "greedy | sampled")->capture_default_str();
  app.add_option("--frequency-penalty", a.frequency_penalty, "Every request's frequency penalty")
      ->capture_default_str();
  app.add_option("--json-schema", a.json_schema,
                 "Constrain every request to this JSON Schema (structured output)");
  app.add_option("--draft-vocab", a.draft_vocab, "MTP draft vocabulary (-1 auto, 0 full)")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    ModelOptions mo;
    const std::optional<Isa> isa = a.isa == "auto" ? std::optional<Isa>(best_isa()) : isa_from_name(a.isa);
    if (!isa || !isa_supported(*isa)) throw std::runtime_error("--isa: unsupported " + a.isa);
    mo.isa = *isa;
    mo.n_threads = a.n_threads;
    mo.max_seq_len = 4096;
    mo.bf16_activations = a.bf16_activations;
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
    if (a.costs) {
      // What Engine::create measures for SpeculationPolicy: target forward and MTP forward by rows
      // (B sequences x r rows), fastest of its repetitions.
      const int k_max = a.k.empty() ? 3 : *std::max_element(a.k.begin(), a.k.end());
      const int max_seqs =
          a.concurrency.empty() ? 16 : *std::max_element(a.concurrency.begin(), a.concurrency.end());
      check((*model)->init_kv_cache(KvCacheConfig{64, max_seqs + 1}), "init_kv_cache");
      Result<SpeculationCosts> costs = measure_speculation_costs(**model, max_seqs, k_max, false);
      check(costs.status(), "measure_speculation_costs");
      const int32_t vocab = (*model)->config().vocab_size;
      const int32_t n_sub = a.draft_vocab < 0 ? std::max(1024, vocab / 4) : a.draft_vocab;
      std::vector<int32_t> ids;
      for (int32_t t = 0; t < std::min(n_sub, vocab); ++t) ids.push_back(t);
      check((*model)->set_mtp_draft_vocab(ids), "set_mtp_draft_vocab");
      Result<SpeculationCosts> sub = measure_speculation_costs(**model, max_seqs, k_max, true);
      check(sub.status(), "measure_speculation_costs");
      fmt::print("{:>6} {:>12} {:>12} {:>16}\n", "rows", "target us", "mtp us",
                 fmt::format("mtp {} us", n_sub));
      for (size_t i = 0; i < costs->target.size(); ++i)
        fmt::print("{:>6} {:>12.1f} {:>12.1f} {:>16.1f}\n", costs->target[i].rows, costs->target[i].ns * 1e-3,
                   costs->draft[i].ns * 1e-3, sub->draft[i].ns * 1e-3);
      return 0;
    }
    std::vector<std::vector<int32_t>> prompts;
    for (const std::string& t : texts) prompts.push_back(encode_chat(*tok, t));
    fmt::print(
        "spec_decode_bench: {} ({} threads), {} prompts, {} tokens each{}, temperature {}, {} drafts, "
        "median of {} runs\n",
        a.model_dir, a.n_threads, prompts.size(), a.max_tokens, a.stop_at_eos ? " (or EOS)" : "",
        a.temperature, a.draft_sampling, a.runs);
    fmt::print("{:>5} {:>14} {:>14} {:>12} {:>10} {:>10} {:>10}  {}\n", "users", "mode", "tok/s/user",
               "tok/s total", "vs off", "cpu vs off", "accept len", "acceptance by position");
    const int k_max = a.k.empty() ? 0 : *std::max_element(a.k.begin(), a.k.end());
    for (const int n : a.concurrency) {
      std::vector<std::pair<int, bool>> modes = {{0, false}};
      for (const int k : a.k) modes.emplace_back(k, false);
      if (!a.no_auto && k_max > 0) modes.emplace_back(k_max, true);
      // Rounds of every mode in turn (a fresh engine each, one warm-up run): the load of a shared
      // host drifts, so each round's ratio against its own off run is the figure, and the median
      // over rounds is reported.
      std::vector<std::vector<Cell>> cells(modes.size());
      std::vector<std::vector<double>> ratios(modes.size()), cpu_ratios(modes.size());
      for (int round = 0; round < a.runs; ++round) {
        for (size_t m = 0; m < modes.size(); ++m) {
          auto engine = make_engine(**model, *tok, n, modes[m].first, modes[m].second, a);
          run_once(*engine, prompts, n, a);  // warm-up
          cells[m].push_back(run_once(*engine, prompts, n, a));
          const double base = cells[0].back().per_user_tok_s;
          ratios[m].push_back(base > 0 ? cells[m].back().per_user_tok_s / base : 0.0);
          const double cpu = cells[m].back().cpu_s_per_token;
          cpu_ratios[m].push_back(cpu > 0 ? cells[0].back().cpu_s_per_token / cpu : 0.0);
        }
      }
      for (size_t m = 0; m < modes.size(); ++m) {
        const auto [k, adaptive] = modes[m];
        std::vector<Cell>& cs = cells[m];
        std::sort(cs.begin(), cs.end(),
                  [](const Cell& x, const Cell& y) { return x.per_user_tok_s < y.per_user_tok_s; });
        const Cell& c = cs[cs.size() / 2];
        std::vector<double>& rs = ratios[m];
        std::sort(rs.begin(), rs.end());
        std::vector<double>& cr = cpu_ratios[m];
        std::sort(cr.begin(), cr.end());
        // Acceptance over all rounds.
        EngineStats s;
        int64_t n_tokens = 0;
        for (const Cell& x : cs) {
          n_tokens += x.n_tokens;
          s.spec_decode_num_drafts += x.stats.spec_decode_num_drafts;
          s.spec_decode_num_draft_tokens += x.stats.spec_decode_num_draft_tokens;
          s.spec_decode_num_accepted_tokens += x.stats.spec_decode_num_accepted_tokens;
          s.spec_decode_num_accepted_tokens_per_pos.resize(
              x.stats.spec_decode_num_accepted_tokens_per_pos.size());
          for (size_t j = 0; j < x.stats.spec_decode_num_accepted_tokens_per_pos.size(); ++j)
            s.spec_decode_num_accepted_tokens_per_pos[j] +=
                x.stats.spec_decode_num_accepted_tokens_per_pos[j];
        }
        const double len = s.spec_decode_num_drafts > 0
                               ? 1.0 + static_cast<double>(s.spec_decode_num_accepted_tokens) /
                                           static_cast<double>(s.spec_decode_num_drafts)
                               : 0.0;
        const double drafts_per_token = static_cast<double>(s.spec_decode_num_draft_tokens) /
                                        std::max<double>(1.0, static_cast<double>(n_tokens));
        const std::string mode = k == 0     ? "off"
                                 : adaptive ? fmt::format("mtp auto k<={}", k)
                                            : fmt::format("mtp k={}", k);
        fmt::print(
            "{:>5} {:>14} {:>14.1f} {:>12.1f} {:>9.2f}x {:>9.2f}x {:>10}  {}\n", n, mode, c.per_user_tok_s,
            c.output_tok_s, rs[rs.size() / 2], cr[cr.size() / 2],
            k == 0 ? std::string("-") : fmt::format("{:.2f}", len),
            k == 0 ? ""
                   : fmt::format("{} ({:.2f} drafts/token)", acceptance_by_position(s), drafts_per_token));
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "spec_decode_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
