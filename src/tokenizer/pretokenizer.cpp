#include "tokenizer/pretokenizer.h"

#include "tokenizer/regex_translation.h"
#include "tokenizer/utf8.h"

namespace ds {

Result<PreTokenizer> PreTokenizer::build(const std::vector<std::string>& patterns, std::string_view source) {
  PreTokenizer pre;
  for (const std::string& pattern : patterns) {
    DS_ASSIGN_OR_RETURN(const std::string fast, translate_hf_regex(pattern, std::string(source), false));
    DS_ASSIGN_OR_RETURN(auto fast_regex, CompiledRegex::compile(fast, source));
    pre.regexes_.push_back(std::move(fast_regex));
    DS_ASSIGN_OR_RETURN(const std::string full, translate_hf_regex(pattern, std::string(source), true));
    DS_ASSIGN_OR_RETURN(auto full_regex, CompiledRegex::compile(full, source));
    pre.delta_regexes_.push_back(std::move(full_regex));
  }
  return pre;
}

namespace {

// One Split step with behavior Isolated: matches and the gaps between them each become a piece.
Status split_isolated(const CompiledRegex& regex, std::string_view piece, RegexScratch& scratch,
                      std::vector<std::string_view>& out) {
  size_t gap_begin = 0;
  size_t search_from = 0;
  while (search_from < piece.size()) {
    DS_ASSIGN_OR_RETURN(const CompiledRegex::Match m, regex.find(piece, search_from, scratch));
    if (m.begin == std::string_view::npos) break;
    if (m.begin > gap_begin) out.push_back(piece.substr(gap_begin, m.begin - gap_begin));
    if (m.end > m.begin) {
      out.push_back(piece.substr(m.begin, m.end - m.begin));
      search_from = m.end;
    } else {
      // An empty match isolates nothing but still cuts the gap, as HF's Split does; step over one
      // character so the search advances.
      const size_t len = utf8::char_length_at(piece, m.begin);
      search_from = m.begin + (len == 0 ? 1 : len);
    }
    gap_begin = m.end;
  }
  if (gap_begin < piece.size()) out.push_back(piece.substr(gap_begin));
  return ok_status();
}

}  // namespace

Status PreTokenizer::split(std::string_view text, RegexScratch& scratch,
                           std::vector<std::string_view>& pieces, std::vector<std::string_view>& work) const {
  if (text.empty()) return ok_status();
  if (regexes_.empty()) {
    pieces.push_back(text);
    return ok_status();
  }
  const auto& regexes = delta_.intersects(text) ? delta_regexes_ : regexes_;
  // Ping-pong between two buffers; the last step writes straight into `pieces`.
  std::vector<std::string_view> current;
  current.swap(work);
  current.clear();
  current.push_back(text);
  std::vector<std::string_view> next;
  for (size_t step = 0; step < regexes.size(); ++step) {
    const bool last = step + 1 == regexes.size();
    std::vector<std::string_view>& out = last ? pieces : next;
    if (!last) out.clear();
    for (std::string_view piece : current) {
      const Status status = split_isolated(*regexes[step], piece, scratch, out);
      if (!status.ok()) {
        work.swap(current);
        return status;
      }
    }
    if (!last) current.swap(next);
  }
  work.swap(current);
  return ok_status();
}

}  // namespace ds
