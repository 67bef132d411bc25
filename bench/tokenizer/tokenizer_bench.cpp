// tokenizer_bench: single-thread encode throughput of the byte-level BPE tokenizer on ~5 MB of
// deterministic English-like text (a fixed word list with punctuation, numbers and newlines).
// Prints the first (cold word cache) run, then the median of 5 warm runs, in MB/s and tokens/s;
// decode throughput is printed as a baseline (a table lookup per token, the floor of the work).
// Both wall-clock and thread-CPU-time rates are printed: on a shared machine the wall figure
// also measures the neighbours; the CPU figure is what one dedicated core would do.
//
// usage: tokenizer_bench TOKENIZER_DIR [--mb N] [--seed S]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace {

constexpr const char* kWords[] = {
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "I",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "had",
    "they",
    "you",
    "were",
    "their",
    "one",
    "all",
    "we",
    "can",
    "her",
    "has",
    "there",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "time",
    "people",
    "year",
    "government",
    "between",
    "development",
    "information",
    "international",
    "university",
    "understanding",
    "tokenizer",
    "inference",
    "throughput",
    "language",
    "model",
    "attention",
    "system",
    "network",
    "because",
    "however",
    "although",
    "through",
    "London",
    "Monday",
    "January",
    "America",
    "Shakespeare",
    "don't",
    "it's",
    "we'll",
    "they've",
    "I'm",
    "well-known",
    "e-mail",
    "naïve",
    "café",
    "approximately",
    "responsibility",
    "characteristics",
};
constexpr const char* kPunct[] = {",", ".", ";", ":", "!", "?", " -", "\"", "'s", ")"};

std::string make_text(size_t n_bytes, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string text;
  text.reserve(n_bytes + 64);
  bool sentence_start = true;
  while (text.size() < n_bytes) {
    std::string word = kWords[rng() % std::size(kWords)];
    if (sentence_start && word[0] >= 'a' && word[0] <= 'z') word[0] = static_cast<char>(word[0] - 'a' + 'A');
    if (rng() % 40 == 0) word = std::to_string(rng() % 100000);
    text += word;
    sentence_start = false;
    const uint32_t r = rng() % 100;
    if (r < 8) {
      text += ". ";
      sentence_start = true;
    } else if (r < 14) {
      text += kPunct[rng() % std::size(kPunct)];
      text += ' ';
    } else if (r < 15) {
      text += ".\n\n";
      sentence_start = true;
    } else {
      text += ' ';
    }
  }
  return text;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TOKENIZER_DIR [--mb N] [--seed S]\n", argv[0]);
    return 2;
  }
  double n_mb = 5.0;
  uint32_t seed = 1234;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--mb") == 0) n_mb = std::atof(argv[i + 1]);
    if (std::strcmp(argv[i], "--seed") == 0) seed = static_cast<uint32_t>(std::atoi(argv[i + 1]));
  }
  const auto t_load = std::chrono::steady_clock::now();
  ds::Result<ds::Tokenizer> tok = ds::Tokenizer::load(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.status().to_string().c_str());
    return 1;
  }
  const double load_s = seconds_since(t_load);
  const std::string text = make_text(static_cast<size_t>(n_mb * 1e6), seed);
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("tokenizer_bench: %.2f MB English-like text (seed %u), 1 thread, load %.2f s\n", mb, seed,
              load_s);

  constexpr int kRuns = 5;
  std::vector<double> encode_s;
  std::vector<double> encode_cpu_s;
  size_t n_tokens = 0;
  std::vector<int32_t> ids;
  for (int run = 0; run <= kRuns; ++run) {  // run 0: cold word cache, reported separately
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = thread_cpu_seconds();
    ds::Result<std::vector<int32_t>> r = tok->encode(text, /*parse_special=*/true);
    const double s = seconds_since(t0);
    const double cpu_s = thread_cpu_seconds() - cpu0;
    if (!r.ok()) {
      std::fprintf(stderr, "tokenizer_bench: encode failed: %s\n", r.status().to_string().c_str());
      return 1;
    }
    n_tokens = r->size();
    if (run == 0) {
      std::printf("encode cold (first run):    %8.1f MB/s  %10.0f tokens/s   CPU time: %8.1f MB/s\n", mb / s,
                  static_cast<double>(n_tokens) / s, mb / cpu_s);
      ids = std::move(*r);
    } else {
      encode_s.push_back(s);
      encode_cpu_s.push_back(cpu_s);
    }
  }
  std::sort(encode_s.begin(), encode_s.end());
  std::sort(encode_cpu_s.begin(), encode_cpu_s.end());
  const double med = encode_s[kRuns / 2];
  const double med_cpu = encode_cpu_s[kRuns / 2];
  std::printf(
      "encode warm (median of %d): %8.1f MB/s  %10.0f tokens/s   CPU time: %8.1f MB/s %10.0f tokens/s\n",
      kRuns, mb / med, static_cast<double>(n_tokens) / med, mb / med_cpu,
      static_cast<double>(n_tokens) / med_cpu);
  std::printf("  %zu tokens, %.2f bytes/token\n", n_tokens,
              static_cast<double>(text.size()) / static_cast<double>(n_tokens));

  std::vector<double> decode_s;
  for (int run = 0; run < kRuns; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    ds::Result<std::string> r = tok->decode(ids);
    decode_s.push_back(seconds_since(t0));
    if (!r.ok() || *r != text) {
      std::fprintf(stderr, "tokenizer_bench: decode did not round-trip\n");
      return 1;
    }
  }
  std::sort(decode_s.begin(), decode_s.end());
  std::printf("decode baseline (median):   %8.1f MB/s  %10.0f tokens/s\n", mb / decode_s[kRuns / 2],
              static_cast<double>(n_tokens) / decode_s[kRuns / 2]);
  return 0;
}
