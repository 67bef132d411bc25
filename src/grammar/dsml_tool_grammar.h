// Strict tool calls: the grammar of a DeepSeek V4 / V4.1 DSML tool-call block whose arguments follow
// each tool's parameters JSON Schema (OpenAI `strict: true`). The engine applies it from the block's
// opening on (docs/grammar.md, "Strict tool calls"):
//
//   <｜DSML｜tool_calls>\n                                   (V4.1: " calls", " invoke", " parameter")
//   <｜DSML｜invoke name="get_weather">\n
//   <｜DSML｜parameter name="city" string="true">Paris</｜DSML｜parameter>\n
//   <｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n
//   </｜DSML｜invoke>\n
//   </｜DSML｜tool_calls>
//
// A property whose schema is just {"type":"string"} is written raw (string="true", no '<' inside so
// the closing tag is unambiguous); every other property is JSON (string="false") under its schema,
// compact, $refs resolved against the tool's parameters. Properties come in schema order, required ones
// always, optional ones or not (as the JSON Schema compiler does for objects). Tools that are not
// strict keep free arguments: any parameter names, raw text or any JSON value.
#pragma once

#include <string_view>

#include "base/status.h"
#include "grammar/grammar.h"

namespace ds::grammar {

// spec_json: {"marker": "｜DSML｜", "calls": "tool_calls", "invoke": "invoke", "parameter": "parameter",
//   "after_marker": bool,   // true: the output so far ends with the first marker ("<｜DSML｜"), so the
//                           // grammar starts at "tool_calls>\n"; false: after the whole opening line
//   "tools": [{"name": "...", "strict": bool, "parameters": {JSON Schema}}, ...]}
// Errors: grammar_bad_input (malformed spec), the JSON Schema compiler's errors (paths prefixed with
// the tool), grammar_unsupported for parameters that are not an object schema.
Result<Grammar> compile_dsml_tool_calls(std::string_view spec_json, const GrammarLimits& limits = {});

}  // namespace ds::grammar
