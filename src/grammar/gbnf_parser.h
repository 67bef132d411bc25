// GBNF (llama.cpp's grammar format) -> the byte CFG. Supported: `name ::= ...` rules (root is the
// start), "literals" and [classes] with the escapes \n \r \t \\ \" \] \xHH \uHHHH \UHHHHHHHH, [^...],
// '.', rule references, ( ) groups, | alternation (also continuing on the next line), * + ? {m} {m,}
// {m,n}, # comments. Errors name line:column.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace ds::grammar {

Result<Grammar> compile_gbnf(std::string_view text, const GrammarLimits& limits = {});

}  // namespace ds::grammar
