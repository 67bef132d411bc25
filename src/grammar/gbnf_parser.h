// GBNF (llama.cpp's grammar format) and the Lark subset -> the byte CFG. Supported: `name ::= ...` rules
// (root is the start), "literals" and [classes] with the escapes \n \r \t \\ \" \] \xHH \uHHHH \UHHHHHHHH,
// [^...],
// '.', rule references, ( ) groups, | alternation (also continuing on the next line), * + ? {m} {m,}
// {m,n}, # comments. Errors name line:column.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace ds::grammar {

Result<Grammar> compile_gbnf(std::string_view text, const GrammarLimits& limits = {});

// The Lark subset vLLM and SGLang users write: `rule: ...` (start is the start rule; `?rule` and
// `!rule` marks accepted), TERMINAL: ... the same way, "literals", /regex/ (the regex compiler's
// subset, no flags), [optional], ( ), |, * + ?, `x ~ n` and `x ~ n..m`, // comments. Errors
// (grammar_unsupported): %import / %ignore / %declare directives, priorities, "..."i, regex flags.
Result<Grammar> compile_lark(std::string_view text, const GrammarLimits& limits = {});

// GBNF when the text has "::=", else Lark.
Result<Grammar> compile_ebnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace ds::grammar
