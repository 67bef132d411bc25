#include "grammar/dsml_tool_grammar.h"

#include <fmt/format.h>

#include <array>
#include <nlohmann/json.hpp>
#include <set>

#include "grammar/grammar_builder.h"
#include "grammar/json_schema_compiler.h"
#include "grammar/utf8_ranges.h"

namespace ds::grammar {

namespace {

using json = nlohmann::ordered_json;

Status bad(std::string_view what) {
  return {ErrorCode::grammar_bad_input, fmt::format("tool calls: {}", what)};
}

std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

// {"type": "string"} and annotations only: the value is written raw.
bool is_plain_string(const json& s) {
  if (!s.is_object() || !s.contains("type") || s["type"] != "string") return false;
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    if (k != "type" && k != "title" && k != "description" && k != "examples" && k != "default") return false;
  }
  return true;
}

class DsmlCompiler {
 public:
  DsmlCompiler(const json& spec, const GrammarLimits& limits) : spec_(spec), limits_(limits), b_(limits) {}

  Result<Grammar> run() {
    for (const char* k : {"marker", "calls", "invoke", "parameter"})
      if (!spec_.contains(k) || !spec_[k].is_string()) return bad(fmt::format("'{}' must be a string", k));
    marker_ = spec_["marker"].get<std::string>();
    const std::string calls = spec_["calls"].get<std::string>();
    invoke_ = spec_["invoke"].get<std::string>();
    parameter_ = spec_["parameter"].get<std::string>();
    if (!spec_.contains("tools") || !spec_["tools"].is_array() || spec_["tools"].empty())
      return bad("'tools' must be a non-empty array");
    const uint32_t root = b_.new_rule("root");
    std::vector<Alternative> invokes;
    for (size_t i = 0; i < spec_["tools"].size(); ++i) {
      DS_ASSIGN_OR_RETURN(Alternative a, invoke(spec_["tools"][i], i));
      invokes.push_back(std::move(a));
    }
    const Element one = b_.choice(std::move(invokes), "invoke");
    Alternative more;
    b_.append_literal(more, "\n");
    more.push_back(one);
    Alternative top;
    if (spec_.value("after_marker", false)) b_.append_literal(top, calls + ">\n");
    top.push_back(one);
    top.push_back(GrammarBuilder::star(b_.choice({more}, "next_invoke")));
    b_.append_literal(top, "\n</" + marker_ + calls + ">");
    b_.add_alternative(root, top);
    return b_.finish();
  }

 private:
  Result<Alternative> invoke(const json& tool, size_t index) {
    const std::string where = fmt::format("tools[{}]", index);
    if (!tool.is_object() || !tool.contains("name") || !tool["name"].is_string())
      return bad(where + ".name must be a string");
    const std::string name = tool["name"].get<std::string>();
    Alternative a;
    b_.append_literal(a, "<" + marker_ + invoke_ + " name=\"" + name + "\">\n");
    if (tool.value("strict", false)) {
      const json params = tool.contains("parameters") ? tool["parameters"] : json::object();
      DS_ASSIGN_OR_RETURN(Element p, strict_parameters(params, name));
      a.push_back(p);
    } else {
      a.push_back(free_parameters());
    }
    b_.append_literal(a, "\n</" + marker_ + invoke_ + ">");
    return a;
  }

  std::string open_parameter(const std::string& key, bool raw) const {
    return "<" + marker_ + parameter_ + " name=\"" + key + "\" string=\"" + (raw ? "true" : "false") + "\">";
  }
  std::string close_parameter() const { return "</" + marker_ + parameter_ + ">"; }

  // Any text without '<' (the closing tag starts with it).
  Element raw_text() {
    if (!raw_text_) {
      Result<Element> ch = b_.char_class(complement_ranges({{'<', '<'}}));
      raw_text_ = GrammarBuilder::star(*ch);
    }
    return *raw_text_;
  }

  Result<Element> strict_parameters(const json& params, const std::string& tool) {
    if (!params.is_object())
      return bad(fmt::format("the parameters of '{}' must be a JSON Schema object", tool));
    if (params.contains("type") && params["type"] != "object")
      return Status{ErrorCode::grammar_unsupported,
                    fmt::format("tool calls: the parameters of '{}' must have type 'object'", tool)};
    for (const char* k : {"anyOf", "oneOf", "allOf", "$ref", "enum", "const"})
      if (params.contains(k))
        return Status{
            ErrorCode::grammar_unsupported,
            fmt::format("tool calls: keyword '{}' at the top of the parameters of '{}' is not supported", k,
                        tool)};
    const json props = params.contains("properties") ? params["properties"] : json::object();
    if (!props.is_object()) return bad(fmt::format("the properties of '{}' must be an object", tool));
    std::set<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (const json& r : params["required"])
        if (r.is_string()) required.insert(r.get<std::string>());
    for (const std::string& r : required)
      if (!props.contains(r))
        return Status{
            ErrorCode::grammar_unsupported,
            fmt::format("tool calls: required parameter '{}' of '{}' is not in its properties", r, tool)};
    const std::string text = params.dump();
    JsonSchemaOptions o;
    o.limits = limits_;
    struct Param {
      Alternative body;
      bool required;
    };
    std::vector<Param> list;
    for (auto it = props.begin(); it != props.end(); ++it) {
      const bool raw = is_plain_string(it.value());
      Alternative body;
      b_.append_literal(body, open_parameter(it.key(), raw));
      if (raw) {
        body.push_back(raw_text());
      } else {
        Result<Grammar> g = compile_json_schema_at(text, "/properties/" + pointer_token(it.key()), o);
        if (!g.ok()) {
          if (g.status().code() == ErrorCode::grammar_empty && !required.count(it.key())) continue;
          return Status{g.status().code(), fmt::format("tool '{}': {}", tool, g.status().message())};
        }
        body.push_back(b_.embed(*g));
      }
      b_.append_literal(body, close_parameter());
      list.push_back({std::move(body), required.count(it.key()) > 0});
    }
    // rest[i][first]: the parameters from i on; `first` = none written yet (no "\n" before).
    const size_t n = list.size();
    std::vector<std::array<uint32_t, 2>> rest(n + 1);
    for (size_t i = 0; i <= n; ++i) rest[i] = {b_.new_rule("params"), b_.new_rule("params")};
    b_.add_alternative(rest[n][0], {});
    b_.add_alternative(rest[n][1], {});
    for (size_t i = n; i-- > 0;) {
      for (int first = 0; first < 2; ++first) {
        Alternative a;
        if (!first) b_.append_literal(a, "\n");
        a.insert(a.end(), list[i].body.begin(), list[i].body.end());
        a.push_back(GrammarBuilder::ref(rest[i + 1][0]));
        b_.add_alternative(rest[i][first], a);
        if (!list[i].required) b_.add_alternative(rest[i][first], {GrammarBuilder::ref(rest[i + 1][first])});
      }
    }
    return GrammarBuilder::ref(rest[0][1]);
  }

  // Free arguments: parameters with any name, raw text or any JSON value.
  Element free_parameters() {
    if (free_params_) return *free_params_;
    Result<Grammar> any = compile_json_schema("{}");
    const Element any_value = b_.embed(*any);
    Result<Element> name_char = b_.char_class(complement_ranges({{'"', '"'}, {'<', '<'}, {'\n', '\n'}}));
    Alternative raw, json_value;
    for (Alternative* a : {&raw, &json_value}) {
      b_.append_literal(*a, "<" + marker_ + parameter_ + " name=\"");
      a->push_back(*name_char);
      a->push_back(GrammarBuilder::star(*name_char));
    }
    b_.append_literal(raw, "\" string=\"true\">");
    raw.push_back(raw_text());
    b_.append_literal(json_value, "\" string=\"false\">");
    json_value.push_back(any_value);
    for (Alternative* a : {&raw, &json_value}) b_.append_literal(*a, close_parameter());
    const Element one = b_.choice({raw, json_value}, "free_param");
    Alternative list;
    (void)b_.append_separated(list, one, b_.literal("\n"), 0, -1);
    free_params_ = b_.choice({list}, "free_params");
    return *free_params_;
  }

  const json& spec_;
  GrammarLimits limits_;
  GrammarBuilder b_;
  std::string marker_, invoke_, parameter_;
  std::optional<Element> raw_text_, free_params_;
};

}  // namespace

Result<Grammar> compile_dsml_tool_calls(std::string_view spec_json, const GrammarLimits& limits) {
  json spec;
  try {
    spec = json::parse(spec_json);
  } catch (const nlohmann::json::exception& e) {
    return bad(fmt::format("the spec is not JSON: {}", e.what()));
  }
  if (!spec.is_object()) return bad("the spec must be an object");
  DsmlCompiler c(spec, limits);
  return c.run();
}

}  // namespace ds::grammar
