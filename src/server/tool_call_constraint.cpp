#include "server/tool_call_constraint.h"

#include <nlohmann/json.hpp>

#include "grammar/grammar_compiler.h"
#include "recipe/dsml_render.h"
#include "recipe/request_error.h"

namespace ds::server {

namespace {

// Where the client put a tool's parameters (Chat Completions nests them under "function",
// Anthropic calls them input_schema).
std::string parameters_field(const recipe::ChatRequest& chat, const recipe::Tool& tool) {
  switch (chat.api) {
    case recipe::ApiKind::chat_completions:
      return tool.source_path + ".function.parameters";
    case recipe::ApiKind::anthropic_messages:
      return tool.source_path + ".input_schema";
    default:
      return tool.source_path + ".parameters";
  }
}

}  // namespace

Status attach_tool_call_constraint(const recipe::ChatRequest& chat, const recipe::RenderedPrompt& prompt,
                                   const Tokenizer& tokenizer, Engine& engine, Request& request) {
  const recipe::Tool* first_strict = nullptr;
  for (const recipe::Tool& t : chat.tools)
    if (t.strict) {
      first_strict = &t;
      break;
    }
  if (first_strict == nullptr || chat.tool_choice.kind == recipe::ToolChoiceKind::none) return ok_status();
  const std::string strict_field =
      first_strict->source_path +
      (chat.api == recipe::ApiKind::chat_completions ? ".function.strict" : ".strict");
  if (prompt.dsml_calls_tag.empty())
    return recipe::unsupported_error(
        strict_field,
        "strict tool calls need a DSML encoding (DeepSeek V4 / V4.1), not " + prompt.encoding_name);
  if (request.grammar != nullptr)
    return recipe::unsupported_error(strict_field,
                                     "strict tool calls together with an output constraint "
                                     "(response_format, output_config.format, structured_outputs, ...)");
  nlohmann::ordered_json spec;
  spec["marker"] = std::string(recipe::kDsml);
  spec["calls"] = prompt.dsml_calls_tag;
  spec["invoke"] = prompt.dsml_invoke_tag;
  spec["parameter"] = prompt.dsml_parameter_tag;
  spec["after_marker"] = !prompt.generation_in_tool_calls;
  spec["tools"] = nlohmann::ordered_json::array();
  for (const recipe::Tool& t : chat.tools) {
    nlohmann::ordered_json tool{{"name", t.name}, {"strict", t.strict}};
    if (!t.parameters_json.empty()) tool["parameters"] = nlohmann::ordered_json::parse(t.parameters_json);
    spec["tools"].push_back(std::move(tool));
  }
  grammar::GrammarSpec gs;
  gs.kind = grammar::GrammarSpec::Kind::dsml_tool_calls;
  gs.source = spec.dump();
  gs.marker_tokens = {std::string(recipe::kDsml)};
  Result<std::shared_ptr<const grammar::CompiledGrammar>> compiled = engine.compile_grammar(gs);
  if (!compiled.ok()) {
    const Status& st = compiled.status();
    if (st.kind() != ErrorKind::user) return st;
    // The message names the tool; the param is the first strict tool's parameters.
    std::string field = parameters_field(chat, *first_strict);
    for (const recipe::Tool& t : chat.tools)
      if (t.strict && st.message().find("'" + t.name + "'") != std::string::npos)
        field = parameters_field(chat, t);
    return recipe::field_error(
        field, st.message(),
        st.code() == ErrorCode::grammar_unsupported ? recipe::kUnsupported : recipe::kInvalidRequest);
  }
  request.grammar = std::move(compiled).value();
  request.grammar_after_token = -1;
  if (!prompt.generation_in_tool_calls) {
    const std::optional<int32_t> marker = tokenizer.token_to_id(recipe::kDsml);
    if (!marker) return recipe::unsupported_error(strict_field, "the tokenizer has no ｜DSML｜ token");
    request.grammar_after_token = *marker;
  }
  return ok_status();
}

}  // namespace ds::server
