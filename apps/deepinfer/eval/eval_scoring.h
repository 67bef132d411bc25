// How eval scores one answer, and the statistics over many. Pure functions, unit-tested on scripted
// answers (tests on random weights score ~0, so the scoring is tested here, not through the model).
//
// Thinking-aware: the answer is the text after the last "</think>" (a server that leaves the
// reasoning in the content), and the caller never passes reasoning_content.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ds::eval {

// The text after the last "</think>", or all of it.
std::string_view strip_thinking(std::string_view text);

// The final answer of a free-form response, the first rule that matches:
//   "#### X" (GSM8K)  >  \boxed{X} (AIME/MATH; the last one, braces balanced)  >  "answer is X" /
//   "Answer: X" (the last one, to the end of its line)  >  the last number  >  the last non-empty line.
std::string extract_final_answer(std::string_view response);

// Canonical form for comparison: trimmed, lower case, surrounding '$', '**', quotes and a final '.'
// removed; a number loses its thousands commas and is printed canonically ("1,000.50" -> "1000.5").
std::string normalize_answer(std::string_view answer);

// Exact match after extraction from the response and normalization of both sides; numbers compare
// by value (relative 1e-9). A gold answer with a "####" rationale (GSM8K's) is reduced to its
// final part first.
bool exact_match(std::string_view response, std::string_view gold);

// The option letter (A..A+n_choices-1) a multiple-choice response chose: the last "answer is X" /
// "Answer: X" / "(X)"-style mention, else the last letter standing alone; nullopt when none.
std::optional<char> extract_choice_letter(std::string_view response, int n_choices);

// Whether the response (thinking stripped, a ```json fence removed) parses as JSON; with
// `expected` non-empty, also whether it equals the parsed `expected`.
bool json_match(std::string_view response, std::string_view expected);

// The unbiased pass@k estimator (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), for c correct of n
// samples; requires 1 <= k <= n and 0 <= c <= n.
double pass_at_k(int64_t n, int64_t c, int64_t k);

struct Interval {
  double low = 0;
  double high = 0;
};
// Wilson score interval for `successes` of `trials` at z (1.96: 95%); [0, 1] for no trials.
Interval wilson_interval(int64_t successes, int64_t trials, double z = 1.959963984540054);

}  // namespace ds::eval
