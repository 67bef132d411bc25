// Shared by the engine benches that send chat prompts (spec_decode_bench, grammar_decode_bench):
// a Status check that throws (the benches' main catches and prints), and one user turn in the
// DeepSeek-V3 chat template the demo model was trained on (the full encodings are recipe::render_prompt;
// the benches link only the engine).
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "base/status.h"
#include "tokenizer/tokenizer.h"

namespace ds::bench {

inline void check(const Status& s, const char* what) {
  if (!s.ok()) throw std::runtime_error(fmt::format("{}: {}", what, s.to_string()));
}

inline std::vector<int32_t> encode_chat(const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids;
  if (tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (const std::string& part : {std::string("<｜User｜>"), text, std::string("<｜Assistant｜>")}) {
    Result<std::vector<int32_t>> p = tok.encode(part, /*parse_special=*/part != text);
    check(p.status(), "encode");
    ids.insert(ids.end(), p->begin(), p->end());
  }
  return ids;
}

}  // namespace ds::bench
