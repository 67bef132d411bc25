#include "tokenizer/compiled_regex.h"

#include <fmt/format.h>

#include "base/assert.h"

namespace ds {
namespace {

// The JIT stack grows on demand up to this size; backtracking over long whitespace runs is the
// deepest user of it. Beyond the limit PCRE2 reports an error, which encode() returns.
constexpr size_t kJitStackStartBytes = 32 * 1024;
constexpr size_t kJitStackMaxBytes = 64 * 1024 * 1024;

}  // namespace

RegexScratch::RegexScratch()
    : match_data_(pcre2_match_data_create(1, nullptr)),
      match_context_(pcre2_match_context_create(nullptr)),
      jit_stack_(pcre2_jit_stack_create(kJitStackStartBytes, kJitStackMaxBytes, nullptr)) {
  DS_ASSERT(match_data_ && match_context_ && jit_stack_, "PCRE2 allocation failed");
  pcre2_jit_stack_assign(match_context_, nullptr, jit_stack_);
}

RegexScratch::~RegexScratch() {
  pcre2_jit_stack_free(jit_stack_);
  pcre2_match_context_free(match_context_);
  pcre2_match_data_free(match_data_);
}

Result<std::unique_ptr<CompiledRegex>> CompiledRegex::compile(const std::string& pattern,
                                                              std::string_view source) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof(message));
    return Status(ErrorCode::tokenizer_bad_file,
                  fmt::format("{}: pre_tokenizer regex {:?} does not compile at offset {}: {}", source,
                              pattern, error_offset, reinterpret_cast<const char*>(message)));
  }
  // JIT is an accelerator only: if it is unavailable the interpreter gives the same matches.
  const bool jit_ok = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::unique_ptr<CompiledRegex>(new CompiledRegex(code, jit_ok, pattern));
}

CompiledRegex::~CompiledRegex() { pcre2_code_free(code_); }

Result<CompiledRegex::Match> CompiledRegex::find(std::string_view subject, size_t start_offset,
                                                 RegexScratch& scratch) const {
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  const int rc = jit_ok_ ? pcre2_jit_match(code_, data, subject.size(), start_offset, 0, scratch.match_data(),
                                           scratch.match_context())
                         : pcre2_match(code_, data, subject.size(), start_offset, PCRE2_NO_UTF_CHECK,
                                       scratch.match_data(), scratch.match_context());
  if (rc == PCRE2_ERROR_NOMATCH) return Match{std::string_view::npos, std::string_view::npos};
  if (rc < 0) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    return Status(ErrorCode::tokenizer_bad_input,
                  fmt::format("pre-tokenizer regex {:?} failed at byte {}: {}", pattern_, start_offset,
                              reinterpret_cast<const char*>(message)));
  }
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(scratch.match_data());
  return Match{ovector[0], ovector[1]};
}

}  // namespace ds
