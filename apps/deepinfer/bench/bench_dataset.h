// The prompts of a serving benchmark. The client has no tokenizer (it must work against any server),
// so lengths are asked in words: "random" draws words from a list of common English words (each one
// token in the BPE tokenizers of DeepSeek, Llama and Qwen, give or take), so N words is close to N
// prompt tokens; the figures then use the token counts the server reports in its usage.
//   random         each prompt: random_input_len random words (seeded)
//   shared-prefix  one shared_prefix_len-word prefix, then random_input_len random words per prompt
//                  (exercises a prefix cache)
//   jsonl          one JSON object per line: {"prompt": "..."} and optionally "max_tokens"/"output_len";
//                  prompts are used in order and repeated when num_prompts is larger
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ds::bench {

struct BenchPrompt {
  std::string text;
  int64_t max_tokens = 0;
};

struct DatasetOptions {
  std::string kind = "random";  // random | shared-prefix | jsonl
  std::string path;             // jsonl
  int num_prompts = 100;
  int random_input_len = 256;
  int random_output_len = 128;
  int shared_prefix_len = 512;
  uint64_t seed = 0;
};

// invalid_argument for an unknown kind or bad lengths; io_error / invalid_argument naming the line
// for a bad jsonl file.
Result<std::vector<BenchPrompt>> make_dataset(const DatasetOptions& options);

}  // namespace ds::bench
