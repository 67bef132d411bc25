// RAII wrapper of one PCRE2 pattern compiled for UTF-8 with Unicode properties (UCP) and JIT.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ds {

// Matching state for one thread: match data sized for the largest pattern and a JIT stack.
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;

  pcre2_match_data* match_data() const { return match_data_; }
  pcre2_match_context* match_context() const { return match_context_; }

 private:
  pcre2_match_data* match_data_ = nullptr;
  pcre2_match_context* match_context_ = nullptr;
  pcre2_jit_stack* jit_stack_ = nullptr;
};

class CompiledRegex {
 public:
  // `source` names where the pattern came from, for the error message.
  static Result<std::unique_ptr<CompiledRegex>> compile(const std::string& pattern, std::string_view source);
  ~CompiledRegex();
  CompiledRegex(const CompiledRegex&) = delete;
  CompiledRegex& operator=(const CompiledRegex&) = delete;

  struct Match {
    size_t begin;
    size_t end;
  };
  // Finds the leftmost match in `subject` at or after `start_offset`. `subject` must be valid
  // UTF-8 (not re-checked). Returns {npos, npos} when there is none.
  Result<Match> find(std::string_view subject, size_t start_offset, RegexScratch& scratch) const;

 private:
  CompiledRegex(pcre2_code* code, bool jit_ok, std::string pattern)
      : code_(code), jit_ok_(jit_ok), pattern_(std::move(pattern)) {}
  pcre2_code* code_;
  bool jit_ok_;
  std::string pattern_;
};

}  // namespace ds
