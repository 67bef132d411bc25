#include "server/structured_output.h"

#include "grammar/grammar_compiler.h"
#include "recipe/request_error.h"

namespace ds::server {

Status attach_output_constraint(const recipe::ResponseFormat& format, bool thinking,
                                const Tokenizer& tokenizer, Engine& engine, Request& request) {
  using Kind = recipe::ResponseFormatKind;
  if (format.kind == Kind::text) return ok_status();
  grammar::GrammarSpec spec;
  switch (format.kind) {
    case Kind::json_object:
      spec.kind = grammar::GrammarSpec::Kind::json_object;
      break;
    case Kind::json_schema:
      spec.kind = grammar::GrammarSpec::Kind::json_schema;
      spec.source = format.schema_json;
      break;
    case Kind::regex:
      spec.kind = grammar::GrammarSpec::Kind::regex;
      spec.source = format.pattern;
      break;
    case Kind::grammar:
      spec.kind = grammar::GrammarSpec::Kind::gbnf;
      spec.source = format.pattern;
      break;
    case Kind::choice:
      spec.kind = grammar::GrammarSpec::Kind::choice;
      spec.choices = format.choices;
      break;
    case Kind::text:
      return ok_status();
  }
  Result<std::shared_ptr<const grammar::CompiledGrammar>> compiled = engine.compile_grammar(spec);
  if (!compiled.ok()) {
    const Status& st = compiled.status();
    const std::string field = format.field.empty() ? "response_format" : format.field;
    if (st.kind() != ErrorKind::user) return st;
    return recipe::field_error(
        field, st.message(),
        st.code() == ErrorCode::grammar_unsupported ? recipe::kUnsupported : recipe::kInvalidRequest);
  }
  request.grammar = std::move(compiled).value();
  if (thinking) {
    const std::optional<int32_t> end_think = tokenizer.token_to_id("</think>");
    if (end_think) request.grammar_after_token = *end_think;
  }
  return ok_status();
}

}  // namespace ds::server
