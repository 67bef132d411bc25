#include "eval/eval_scoring.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

namespace ds::eval {

std::string_view strip_thinking(std::string_view text) {
  const size_t end = text.rfind("</think>");
  return end == std::string_view::npos ? text : text.substr(end + 8);
}

namespace {

std::string trim(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string to_end_of_line(std::string_view s) { return trim(s.substr(0, s.find('\n'))); }

// \boxed{...} with nested braces; the content of the last one, or nullopt.
std::optional<std::string> last_boxed(std::string_view s) {
  const size_t at = s.rfind("\\boxed{");
  if (at == std::string_view::npos) return std::nullopt;
  int depth = 0;
  for (size_t i = at + 6; i < s.size(); ++i) {
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth == 0) return std::string(s.substr(at + 7, i - at - 7));
  }
  return std::nullopt;
}

const std::regex& number_regex() {
  static const std::regex re(R"(-?\d[\d,]*(?:\.\d+)?|-?\.\d+)");
  return re;
}

// A number with optional thousands commas and nothing else, as a double.
std::optional<double> as_number(const std::string& s) {
  static const std::regex full(R"(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|-?\.\d+)");
  if (!std::regex_match(s, full)) return std::nullopt;
  std::string digits;
  for (const char c : s)
    if (c != ',') digits.push_back(c);
  return std::stod(digits);
}

}  // namespace

std::string extract_final_answer(std::string_view response) {
  const std::string_view text = strip_thinking(response);
  if (const size_t at = text.rfind("####"); at != std::string_view::npos)
    return to_end_of_line(text.substr(at + 4));
  if (std::optional<std::string> boxed = last_boxed(text)) return trim(*boxed);
  static const std::regex answer_is(R"((?:answer is|answer:)[ \t]*:?[ \t]*([^\n]*))", std::regex::icase);
  std::string last_answer;
  const std::string owned(text);
  for (auto it = std::sregex_iterator(owned.begin(), owned.end(), answer_is); it != std::sregex_iterator();
       ++it)
    last_answer = trim((*it)[1].str());
  if (!last_answer.empty()) return last_answer;
  std::string last_number;
  for (auto it = std::sregex_iterator(owned.begin(), owned.end(), number_regex());
       it != std::sregex_iterator(); ++it)
    last_number = (*it)[0].str();
  if (!last_number.empty()) return last_number;
  const std::string t = trim(text);
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : trim(std::string_view(t).substr(nl + 1));
}

std::string normalize_answer(std::string_view answer) {
  std::string s = trim(answer);
  bool changed = true;
  while (changed && !s.empty()) {
    changed = false;
    for (const std::string_view wrap : {"**", "$", "\"", "'", "`"}) {
      if (s.size() >= 2 * wrap.size() && s.starts_with(wrap) && s.ends_with(wrap)) {
        s = trim(std::string_view(s).substr(wrap.size(), s.size() - 2 * wrap.size()));
        changed = true;
      }
    }
    if (!s.empty() && s.back() == '.') {
      s.pop_back();
      changed = true;
    }
    if (!s.empty() && s.front() == '$') {
      s = trim(std::string_view(s).substr(1));  // "$18" (a price)
      changed = true;
    }
  }
  if (std::optional<double> v = as_number(s)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.12g", *v);
    return buf;
  }
  return lower(s);
}

bool exact_match(std::string_view response, std::string_view gold) {
  std::string gold_final(gold);
  if (const size_t at = gold.rfind("####"); at != std::string_view::npos)
    gold_final = to_end_of_line(gold.substr(at + 4));
  const std::string got = normalize_answer(extract_final_answer(response));
  const std::string want = normalize_answer(gold_final);
  if (got == want) return true;
  const std::optional<double> a = as_number(got), b = as_number(want);
  return a && b && std::fabs(*a - *b) <= 1e-9 * std::max(1.0, std::fabs(*b));
}

std::optional<char> extract_choice_letter(std::string_view response, int n_choices) {
  const std::string text(strip_thinking(response));
  const char last = static_cast<char>('A' + std::clamp(n_choices, 1, 26) - 1);
  const std::string range = std::string("A-") + last;
  // Case-sensitive on the letter ("the answer is a bit..." names no option).
  const std::regex stated("(?:[Aa]nswer is|[Aa]nswer:|ANSWER:|[Aa]nswer\\s*=)\\s*:?\\s*[\\(\\[*]*([" + range +
                          "])\\b");
  std::optional<char> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), stated); it != std::sregex_iterator(); ++it) {
    found = (*it)[1].str()[0];
  }
  if (found) return found;
  // A capital letter standing alone: "(C)", "C.", "**C**", "C" on its own.
  const std::regex alone("(?:^|[^A-Za-z0-9])([" + range + "])(?:$|[^A-Za-z0-9'])");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), alone); it != std::sregex_iterator(); ++it)
    found = (*it)[1].str()[0];
  return found;
}

bool json_match(std::string_view response, std::string_view expected) {
  std::string text = trim(strip_thinking(response));
  if (text.starts_with("```")) {
    const size_t nl = text.find('\n');
    const size_t close = text.rfind("```");
    if (nl != std::string::npos && close != std::string::npos && close > nl)
      text = text.substr(nl + 1, close - nl - 1);
  }
  const nlohmann::json got = nlohmann::json::parse(text, nullptr, false);
  if (got.is_discarded()) return false;
  if (expected.empty()) return true;
  const nlohmann::json want = nlohmann::json::parse(expected, nullptr, false);
  return !want.is_discarded() && got == want;
}

double pass_at_k(int64_t n, int64_t c, int64_t k) {
  if (n - c < k) return 1.0;
  // 1 - prod_{i = n-c+1}^{n} (1 - k / i): stable, no big binomials.
  double fail = 1.0;
  for (int64_t i = n - c + 1; i <= n; ++i) fail *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
  return 1.0 - fail;
}

Interval wilson_interval(int64_t successes, int64_t trials, double z) {
  if (trials <= 0) return {0.0, 1.0};
  const double n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n;
  const double z2 = z * z;
  const double center = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  // The bounds are exactly 0 (1) with no successes (failures); rounding must not move them inside.
  return {successes == 0 ? 0.0 : std::max(0.0, center - half),
          successes == trials ? 1.0 : std::min(1.0, center + half)};
}

}  // namespace ds::eval
