#include "bench/bench_dataset.h"

#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

namespace ds::bench {
namespace {

// Common short English words: single tokens in the usual BPE vocabularies.
constexpr std::array<const char*, 64> kWords = {
    "the",  "of",    "and",   "to",   "in",   "is",    "you",   "that",  "it",   "he",    "was",
    "for",  "on",    "are",   "as",   "with", "his",   "they",  "at",    "be",   "this",  "have",
    "from", "or",    "one",   "had",  "by",   "word",  "but",   "not",   "what", "all",   "were",
    "we",   "when",  "your",  "can",  "said", "there", "use",   "an",    "each", "which", "she",
    "do",   "how",   "their", "if",   "will", "up",    "other", "about", "out",  "many",  "then",
    "them", "these", "so",    "some", "her",  "would", "make",  "like",  "time"};

std::string random_words(int n, std::mt19937_64& rng) {
  std::uniform_int_distribution<size_t> pick(0, kWords.size() - 1);
  std::string out;
  for (int i = 0; i < n; ++i) {
    if (i > 0) out.push_back(' ');
    out += kWords[pick(rng)];
  }
  return out;
}

Result<std::vector<BenchPrompt>> read_jsonl(const DatasetOptions& o) {
  std::ifstream in(o.path);
  if (!in) return Status(ErrorCode::io_error, "cannot open dataset file " + o.path);
  std::vector<BenchPrompt> lines;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const std::string where = o.path + ":" + std::to_string(line_no);
    if (j.is_discarded() || !j.is_object())
      return Status(ErrorCode::invalid_argument, where + ": not a JSON object");
    if (!j.contains("prompt") || !j["prompt"].is_string())
      return Status(ErrorCode::invalid_argument, where + ": field 'prompt' (string) is missing");
    BenchPrompt p{j["prompt"].get<std::string>(), o.random_output_len};
    for (const char* key : {"max_tokens", "output_len"}) {
      if (j.contains(key)) {
        if (!j[key].is_number_integer() || j[key].get<int64_t>() < 1)
          return Status(ErrorCode::invalid_argument, where + ": field '" + key + "' must be an integer >= 1");
        p.max_tokens = j[key].get<int64_t>();
      }
    }
    lines.push_back(std::move(p));
  }
  if (lines.empty()) return Status(ErrorCode::invalid_argument, o.path + ": no prompts");
  std::vector<BenchPrompt> out;
  for (int i = 0; i < o.num_prompts; ++i) out.push_back(lines[static_cast<size_t>(i) % lines.size()]);
  return out;
}

}  // namespace

Result<std::vector<BenchPrompt>> make_dataset(const DatasetOptions& o) {
  if (o.num_prompts < 1) return Status(ErrorCode::invalid_argument, "--num-prompts must be >= 1");
  if (o.random_output_len < 1) return Status(ErrorCode::invalid_argument, "--random-output-len must be >= 1");
  if (o.kind == "jsonl") {
    if (o.path.empty()) return Status(ErrorCode::invalid_argument, "--dataset jsonl needs --dataset-path");
    return read_jsonl(o);
  }
  if (o.random_input_len < 1) return Status(ErrorCode::invalid_argument, "--random-input-len must be >= 1");
  std::mt19937_64 rng(o.seed);
  std::string prefix;
  if (o.kind == "shared-prefix") {
    if (o.shared_prefix_len < 1)
      return Status(ErrorCode::invalid_argument, "--shared-prefix-len must be >= 1");
    prefix = random_words(o.shared_prefix_len, rng) + " ";
  } else if (o.kind != "random") {
    return Status(ErrorCode::invalid_argument,
                  "--dataset must be random, shared-prefix or jsonl, not '" + o.kind + "'");
  }
  std::vector<BenchPrompt> out;
  for (int i = 0; i < o.num_prompts; ++i)
    out.push_back({prefix + random_words(o.random_input_len, rng), o.random_output_len});
  return out;
}

}  // namespace ds::bench
