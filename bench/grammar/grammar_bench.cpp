// Token-mask and compile cost on the real DeepSeek-V3 vocabulary (129,280 ids) over a JSON Schema
// corpus after JSONSchemaBench's categories (schema_corpus.h).
//
// For each schema: compile time; then random decodes (seeded) where each step builds the full-vocabulary
// mask (GrammarMatcher::fill_next_token_mask) and takes a random allowed token (biased towards closing
// bytes so that walks end). Wall and thread-CPU time are both reported (the machine is shared). First
// visits of states are walked through the grammar's LocalDfa; the baseline walks the costliest of them
// again with the plain Earley walk (walk_state_mask_plain), in the same run. Reported: mask time per token
// p50 / p99 / max over all steps, split into steps that hit the per-state cache and steps that computed a
// state (first visit); the baseline is the plain reference mask (every token tried) on a sample of the same
// steps, and a 16 KB memcpy (the floor of any mask that is copied). Plus the trie build and a ~10 KB schema's
// compile time, and the mask cost of bounded repeats too wide to go flat (report_long_repeats).
//
// usage: grammar_bench [--tokenizer DIR] [--per-category N] [--walks N] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "bench/grammar/schema_corpus.h"
#include "grammar/grammar_compiler.h"
#include "grammar/grammar_matcher.h"
#include "grammar/jump_forward.h"
#include "grammar/state_mask_walk.h"
#include "grammar/token_bitmask.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// CPU time of this thread: on a shared machine a step's wall time also counts the time the scheduler
// gave other processes; both are reported.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

// Bounded repeats wider than the flat limit (32 optional copies) nest in blocks of 32: after k copies
// every byte completes k / 32 nested rules, and when nothing follows the repeat (a regex that ends with
// it) it is no repeat run, so every position is a first visit (docs/grammar.md, "Known gap"). Random
// walks of 8 steps with the repeat last and with a byte after it.
void report_long_repeats(const std::shared_ptr<const ds::grammar::TokenTrie>& vocab, uint32_t seed) {
  ds::grammar::GrammarCompiler compiler(vocab);
  for (const char* source : {"[a-z ]{0,40}", "[a-z ]{0,80}", "[a-z ]{0,40}x", "[a-z ]{0,80}x"}) {
    ds::grammar::GrammarSpec spec;
    spec.kind = ds::grammar::GrammarSpec::Kind::regex;
    spec.source = source;
    auto compiled = compiler.compile(spec);
    if (!compiled.ok()) continue;
    ds::grammar::GrammarMatcher m(*compiled);
    std::vector<uint32_t> mask(ds::grammar::bitmask_words(vocab->vocab_size()));
    std::mt19937 rng(seed);
    std::vector<double> us;
    for (int step = 0; step < 8 && !m.is_terminated(); ++step) {
      const double c0 = thread_cpu_us();
      m.fill_next_token_mask(mask);
      us.push_back(thread_cpu_us() - c0);
      std::vector<int32_t> allowed;
      for (size_t t = 0; t < vocab->vocab_size(); ++t)
        if (ds::grammar::bitmask_test(mask, static_cast<int32_t>(t)))
          allowed.push_back(static_cast<int32_t>(t));
      if (allowed.empty() || !m.accept_token(allowed[rng() % allowed.size()])) break;
    }
    std::printf("long repeat %-14s mask CPU p50 %9.0f us  max %9.0f us  (%zu steps)\n", source,
                percentile(us, 0.5), percentile(us, 1.0), us.size());
  }
}

int main(int argc, char** argv) {
  std::string tokenizer_dir = DS_DEFAULT_TOKENIZER_DIR;
  int per_category = 4, walks = 3;
  uint32_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--tokenizer")
      tokenizer_dir = argv[i + 1];
    else if (a == "--per-category")
      per_category = std::atoi(argv[i + 1]);
    else if (a == "--walks")
      walks = std::atoi(argv[i + 1]);
    else if (a == "--seed")
      seed = static_cast<uint32_t>(std::atoi(argv[i + 1]));
  }
  ds::Result<ds::Tokenizer> tok = ds::Tokenizer::load(tokenizer_dir);
  if (!tok.ok()) {
    std::fprintf(stderr, "grammar_bench: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  auto t0 = Clock::now();
  ds::Result<ds::grammar::TokenTrie> trie = ds::grammar::TokenTrie::from_tokenizer(*tok);
  const double trie_ms = us_since(t0) / 1000.0;
  auto vocab = std::make_shared<const ds::grammar::TokenTrie>(std::move(*trie));
  std::printf("vocabulary: %zu ids, trie %zu nodes, built in %.1f ms\n", vocab->vocab_size(),
              vocab->n_nodes(), trie_ms);

  const size_t words = ds::grammar::bitmask_words(vocab->vocab_size());
  std::vector<uint32_t> mask(words), src(words, 0x5a5a5a5a);
  // Floor: copying one mask (median of 1000).
  std::vector<double> copy_us;
  for (int i = 0; i < 1000; ++i) {
    auto c0 = Clock::now();
    std::memcpy(mask.data(), src.data(), words * 4);
    asm volatile("" ::"r"(mask.data()) : "memory");
    copy_us.push_back(us_since(c0));
  }
  std::printf("16 KB mask memcpy: p50 %.2f us\n", percentile(copy_us, 0.5));

  std::mt19937 rng(seed);
  std::vector<double> warm_us, cold_us, all_us, all_cpu_us, cold_cpu_us, ref_us, compile_ms;
  std::vector<double> plain_cpu_us, dfa_cpu_us;  // expensive first visits: plain walk vs the mask step
  std::map<std::string, std::vector<double>> per_category_us;
  int n_complete = 0, n_walks = 0;
  // Masks over 1 ms CPU by what they did (repeat runs: docs/grammar.md); run walks and derived positions.
  size_t over_ms_run_walk = 0, over_ms_derived = 0, over_ms_walk = 0, over_ms_hit = 0;
  // Jump-forward (jump_forward.h): tokens it would append along the same walks, without changing them.
  size_t n_jump_tokens = 0, n_jump_steps = 0, n_steps_total = 0;
  size_t n_run_walks = 0, n_run_exit_walks = 0, n_run_derived = 0, n_run_class_walks_at_compile = 0;
  for (const ds::bench::CorpusSchema& schema : ds::bench::make_schema_corpus(per_category, seed)) {
    ds::grammar::GrammarCompiler compiler(vocab);  // fresh cache per schema: cold states are counted
    ds::grammar::GrammarSpec spec;
    spec.kind = ds::grammar::GrammarSpec::Kind::json_schema;
    spec.source = schema.text;
    auto c0 = Clock::now();
    auto compiled = compiler.compile(spec);
    compile_ms.push_back(us_since(c0) / 1000.0);
    if (!compiled.ok()) {
      std::fprintf(stderr, "%s: %s\n", schema.category.c_str(), compiled.status().to_string().c_str());
      return 1;
    }
    n_run_class_walks_at_compile += (*compiled)->n_run_walks();
    for (int w = 0; w < walks; ++w, ++n_walks) {
      ds::grammar::GrammarMatcher m(*compiled);
      // The same parse outside the matcher, for the plain-walk baseline of first visits.
      ds::grammar::EarleyParser shadow((*compiled)->tables()), local((*compiled)->tables());
      for (int step = 0; step < 400 && !m.is_terminated(); ++step) {
        const size_t states_before = (*compiled)->n_cached_states();
        const size_t run_walks_before = (*compiled)->n_run_walks();
        const size_t exit_walks_before = (*compiled)->n_run_exit_walks();
        const size_t derived_before = (*compiled)->n_run_positions_derived();
        const double cpu0 = thread_cpu_us();
        auto m0 = Clock::now();
        m.fill_next_token_mask(mask);
        const double us = us_since(m0);
        const double cpu_us = thread_cpu_us() - cpu0;
        all_us.push_back(us);
        all_cpu_us.push_back(cpu_us);
        per_category_us[schema.category].push_back(us);
        const bool computed = (*compiled)->n_cached_states() > states_before;
        (computed ? cold_us : warm_us).push_back(us);
        if (computed) cold_cpu_us.push_back(cpu_us);
        const bool run_walk = (*compiled)->n_run_walks() > run_walks_before;
        const bool derived = (*compiled)->n_run_positions_derived() > derived_before;
        n_run_walks += run_walk ? 1 : 0;
        n_run_exit_walks += (*compiled)->n_run_exit_walks() > exit_walks_before ? 1 : 0;
        n_run_derived += derived ? 1 : 0;
        if (cpu_us > 1000.0)
          ++(run_walk ? over_ms_run_walk : derived ? over_ms_derived : computed ? over_ms_walk : over_ms_hit);
        if (computed && !derived && cpu_us > 500.0 && plain_cpu_us.size() < 30) {
          // An expensive first visit: the same state's walk with the plain Earley parser at every node.
          local.reset_local(shadow);
          ds::grammar::StateMask plain;
          const double p0 = thread_cpu_us();
          ds::grammar::walk_state_mask_plain(*vocab, local, plain);
          plain_cpu_us.push_back(thread_cpu_us() - p0);
          dfa_cpu_us.push_back(cpu_us);
        }
        {
          ds::grammar::GrammarMatcher probe = m;
          const size_t n = ds::grammar::jump_forward_tokens(probe, *tok).size();
          n_jump_tokens += n;
          n_jump_steps += n > 0 ? 1 : 0;
          ++n_steps_total;
        }
        if (step % 50 == 7 && ref_us.size() < 40) {
          auto r0 = Clock::now();
          m.fill_next_token_mask_reference(mask);
          ref_us.push_back(us_since(r0));
          m.fill_next_token_mask(mask);
        }
        std::vector<int32_t> allowed, closing;
        for (size_t id = 0; id < vocab->vocab_size(); ++id) {
          if (!ds::grammar::bitmask_test(mask, static_cast<int32_t>(id))) continue;
          allowed.push_back(static_cast<int32_t>(id));
          const std::string& b = vocab->token_bytes(static_cast<int32_t>(id));
          if (static_cast<int32_t>(id) == vocab->eos_id() || b.find_first_of("\"}]") != std::string::npos)
            closing.push_back(static_cast<int32_t>(id));
        }
        if (allowed.empty()) break;
        const auto& from = !closing.empty() && rng() % 3 == 0 ? closing : allowed;
        const int32_t next = from[rng() % from.size()];
        if (next != vocab->eos_id())
          for (char c : vocab->token_bytes(next)) shadow.push_byte(static_cast<uint8_t>(c));
        if (!m.accept_token(next)) {
          std::fprintf(stderr, "mask allowed a token accept_token refused\n");
          return 1;
        }
      }
      n_complete += m.is_accepting() ? 1 : 0;
    }
  }
  std::printf("corpus: %zu schemas (%d per category), %d walks (%d complete), %zu mask steps, seed %u\n",
              compile_ms.size(), per_category, n_walks, n_complete, all_us.size(), seed);
  std::printf("mask per token, all steps:   p50 %8.1f us  p99 %8.1f us  max %8.1f us\n",
              percentile(all_us, 0.5), percentile(all_us, 0.99), percentile(all_us, 1.0));
  std::printf("  same, thread CPU time:     p50 %8.1f us  p99 %8.1f us  max %8.1f us\n",
              percentile(all_cpu_us, 0.5), percentile(all_cpu_us, 0.99), percentile(all_cpu_us, 1.0));
  std::printf("  cache hit (%6zu steps):    p50 %8.1f us  p99 %8.1f us\n", warm_us.size(),
              percentile(warm_us, 0.5), percentile(warm_us, 0.99));
  std::printf("  state computed (%5zu):     p50 %8.1f us  p99 %8.1f us\n", cold_us.size(),
              percentile(cold_us, 0.5), percentile(cold_us, 0.99));
  std::printf("  state computed, CPU time:  p50 %8.1f us  p99 %8.1f us  max %8.1f us\n",
              percentile(cold_cpu_us, 0.5), percentile(cold_cpu_us, 0.99), percentile(cold_cpu_us, 1.0));
  std::printf(
      "  repeat runs: %zu class walks at compile time, %zu while decoding, %zu exit walks, %zu positions "
      "derived\n  masks over 1 ms CPU: %zu with a class walk, %zu other derived, %zu other first visits, "
      "%zu cache hits\n",
      n_run_class_walks_at_compile, n_run_walks, n_run_exit_walks, n_run_derived, over_ms_run_walk,
      over_ms_derived, over_ms_walk, over_ms_hit);
  std::printf(
      "  baseline: the %zu first visits over 500 us CPU, walked again with the plain Earley walk:\n"
      "    plain walk p50 %.0f us  max %.0f us  vs the mask step (DFA walk) p50 %.0f us  max %.0f us"
      " -> %.0fx at p50\n",
      plain_cpu_us.size(), percentile(plain_cpu_us, 0.5), percentile(plain_cpu_us, 1.0),
      percentile(dfa_cpu_us, 0.5), percentile(dfa_cpu_us, 1.0),
      percentile(plain_cpu_us, 0.5) / std::max(1e-3, percentile(dfa_cpu_us, 0.5)));
  for (const auto& [cat, v] : per_category_us)
    std::printf("  %-16s p50 %8.1f us  p99 %8.1f us  (%zu steps)\n", cat.c_str(), percentile(v, 0.5),
                percentile(v, 0.99), v.size());
  std::printf(
      "baseline reference mask (every token tried, %zu samples): p50 %.1f us -> fast mask %.0fx faster at "
      "p50\n",
      ref_us.size(), percentile(ref_us, 0.5),
      percentile(ref_us, 0.5) / std::max(1e-3, percentile(all_us, 0.5)));
  std::printf(
      "jump-forward along the walks: %zu of %zu steps had forced tokens, %zu tokens in all (%.1f%% of the "
      "sampled tokens; random walks, not a model)\n",
      n_jump_steps, n_steps_total, n_jump_tokens,
      100.0 * static_cast<double>(n_jump_tokens) / static_cast<double>(std::max<size_t>(1, n_steps_total)));
  std::printf("compile per schema: p50 %.2f ms  max %.2f ms\n", percentile(compile_ms, 0.5),
              percentile(compile_ms, 1.0));
  for (size_t bytes : {size_t{10'000}, size_t{50'000}}) {
    const std::string big = ds::bench::make_large_schema(bytes, seed);
    std::vector<double> ms;
    for (int i = 0; i < 5; ++i) {
      ds::grammar::GrammarCompiler compiler(vocab);
      ds::grammar::GrammarSpec spec;
      spec.kind = ds::grammar::GrammarSpec::Kind::json_schema;
      spec.source = big;
      auto c0 = Clock::now();
      if (!compiler.compile(spec).ok()) return 1;
      ms.push_back(us_since(c0) / 1000.0);
    }
    std::printf("compile %zu-byte schema: median of 5 %.2f ms\n", big.size(), percentile(ms, 0.5));
  }
  report_long_repeats(vocab, seed);
  return 0;
}
