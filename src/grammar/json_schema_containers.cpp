#include <fmt/format.h>

#include <array>

#include "grammar/json_schema_internal.h"

namespace ds::grammar::json_schema {

// Items schemas up to this many grammar elements get a second copy for the first array element.
constexpr size_t kDuplicateItemsElements = 400;

Result<Element> SchemaCompiler::compile_object(const json& s, const std::string& path, size_t depth) {
  const json empty = json::object();
  const json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) return bad(path + "/properties", "must be an object");
  std::set<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return bad(path + "/required", "must be an array");
    for (const json& r : s["required"]) {
      if (!r.is_string()) return bad(path + "/required", "names must be strings");
      required.insert(r.get<std::string>());
    }
  }
  const json* additional = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  const bool additional_false = additional != nullptr && additional->is_boolean() && !additional->get<bool>();
  // No listed properties: a map whose values follow additionalProperties (default: anything).
  if (props.empty() && required.empty()) {
    if (additional_false) return b_.literal("{}");
    Element value = any_value();
    if (additional != nullptr) {
      DS_ASSIGN_OR_RETURN(value, compile(*additional, path + "/additionalProperties", depth + 1));
    }
    return b_.choice({map_body(value)}, "map");
  }
  // Listed properties, in schema order; required names not listed come after them with the
  // additionalProperties schema (or any value). Extra keys are not generated: that narrows, and
  // keeps every key unique.
  struct Prop {
    std::string key;
    Element value;
    bool required;
  };
  std::vector<Prop> list;
  for (auto it = props.begin(); it != props.end(); ++it) {
    const std::string ppath = path + "/properties/" + escape_pointer_token(it.key());
    Result<Element> v = compile(it.value(), ppath, depth + 1);
    if (!v.ok()) {
      // An optional property whose schema is empty is just never written.
      if (v.status().code() == ErrorCode::grammar_empty && !required.count(it.key())) continue;
      return v.status();
    }
    list.push_back({it.key(), *v, required.count(it.key()) > 0});
  }
  for (const std::string& r : required) {
    if (props.contains(r)) continue;
    if (additional_false)
      return Status{
          ErrorCode::grammar_empty,
          fmt::format("json schema: at '{}': required '{}' is not allowed by additionalProperties", path, r)};
    Element v = any_value();
    if (additional != nullptr) {
      DS_ASSIGN_OR_RETURN(v, compile(*additional, path + "/additionalProperties", depth + 1));
    }
    list.push_back({r, v, true});
  }
  // rest[i][first]: the properties from i on; `first` = nothing written yet (no leading comma).
  const size_t n = list.size();
  std::vector<std::array<uint32_t, 2>> rest(n + 1);
  for (size_t i = 0; i <= n; ++i) rest[i] = {b_.new_rule("props"), b_.new_rule("props")};
  b_.add_alternative(rest[n][0], {});
  b_.add_alternative(rest[n][1], {});
  for (size_t i = n; i-- > 0;) {
    for (int first = 0; first < 2; ++first) {
      Alternative a;
      if (!first) punct(a, ',');
      b_.append_literal(a, json(list[i].key).dump(-1, ' ', false, json::error_handler_t::replace));
      punct(a, ':');
      a.push_back(list[i].value);
      a.push_back(GrammarBuilder::ref(rest[i + 1][0]));
      b_.add_alternative(rest[i][first], a);
      if (!list[i].required) b_.add_alternative(rest[i][first], {GrammarBuilder::ref(rest[i + 1][first])});
    }
  }
  Alternative obj{b_.byte('{')};
  ws(obj);
  obj.push_back(GrammarBuilder::ref(rest[0][1]));
  ws(obj);
  obj.push_back(b_.byte('}'));
  return b_.choice({obj}, "obj");
}

Result<Element> SchemaCompiler::compile_array(const json& s, const std::string& path, size_t depth) {
  int64_t min = 0, max = -1;
  if (s.contains("minItems")) {
    DS_ASSIGN_OR_RETURN(min, non_negative_int(s, "minItems", path));
  }
  if (s.contains("maxItems")) {
    DS_ASSIGN_OR_RETURN(max, non_negative_int(s, "maxItems", path));
  }
  std::vector<Element> prefix;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return bad(path + "/prefixItems", "must be an array");
    for (size_t i = 0; i < s["prefixItems"].size(); ++i) {
      DS_ASSIGN_OR_RETURN(Element e,
                          compile(s["prefixItems"][i], fmt::format("{}/prefixItems/{}", path, i), depth + 1));
      prefix.push_back(e);
    }
  }
  std::optional<Element> item = any_value();
  // The items schema is compiled twice when it is small: once for the first element and once for
  // the others (after a comma), so each copy has one parent and the token cache walks through it
  // (ParserTables::sole_parent). A large one is shared.
  std::optional<Element> first_item;
  if (s.contains("items")) {
    const size_t before = b_.n_elements();
    Result<Element> e = compile(s["items"], path + "/items", depth + 1);
    if (e.ok()) {
      item = *e;
      if (b_.n_elements() - before <= kDuplicateItemsElements) {
        DS_ASSIGN_OR_RETURN(first_item, compile(s["items"], path + "/items", depth + 1));
      }
    } else if (e.status().code() == ErrorCode::grammar_empty) {
      item.reset();  // items: false (or an empty schema): only the prefix
    } else {
      return e.status();
    }
  }
  const auto n_prefix = static_cast<int64_t>(prefix.size());
  if (!item) max = max < 0 ? n_prefix : std::min(max, n_prefix);
  if (max >= 0 && max < min)
    return Status{ErrorCode::grammar_empty, fmt::format("json schema: at '{}': no array length fits", path)};
  if (static_cast<uint64_t>(std::max(min, max)) > o_.limits.max_repeat)
    return Status{
        ErrorCode::grammar_too_large,
        fmt::format("json schema: at '{}': item bounds over the limit {}", path, o_.limits.max_repeat)};
  Alternative sep_alt;
  punct(sep_alt, ',');
  const Element sep = b_.choice({sep_alt}, "comma");
  // tail(j, first): elements from position j on (j <= n_prefix), then the repeated items.
  const uint32_t items_tail = b_.new_rule("items");
  const uint32_t items_tail_first = b_.new_rule("items");
  const int64_t extra_min = std::max<int64_t>(0, min - n_prefix);
  const int64_t extra_max = max < 0 ? -1 : std::max<int64_t>(0, max - n_prefix);
  if (item && extra_max != 0) {
    // With a leading comma (after some prefix element) and without (nothing written yet).
    Alternative with_comma, without;
    const uint32_t one = b_.new_rule("item");
    b_.add_alternative(one, {sep, *item});
    DS_TRY(b_.append_repeat(with_comma, GrammarBuilder::ref(one), extra_min, extra_max));
    Alternative body{first_item.value_or(*item)};
    DS_TRY(b_.append_repeat(body, GrammarBuilder::ref(one), std::max<int64_t>(0, extra_min - 1),
                            extra_max < 0 ? -1 : extra_max - 1));
    if (extra_min > 0) {
      without = std::move(body);
    } else {
      without.push_back(b_.optional(b_.choice({body}, "seq")));
    }
    b_.add_alternative(items_tail, with_comma);
    b_.add_alternative(items_tail_first, without);
  } else {
    b_.add_alternative(items_tail, {});
    b_.add_alternative(items_tail_first, {});
  }
  uint32_t next_rest = items_tail;
  uint32_t next_first = items_tail_first;
  for (int64_t j = n_prefix; j-- > 0;) {
    const uint32_t r_rest = b_.new_rule("tuple");
    const uint32_t r_first = b_.new_rule("tuple");
    b_.add_alternative(r_rest, {sep, prefix[static_cast<size_t>(j)], GrammarBuilder::ref(next_rest)});
    b_.add_alternative(r_first, {prefix[static_cast<size_t>(j)], GrammarBuilder::ref(next_rest)});
    if (j >= min) {  // the array may stop before element j
      b_.add_alternative(r_rest, {});
      b_.add_alternative(r_first, {});
    }
    next_rest = r_rest;
    next_first = r_first;
  }
  Alternative arr{b_.byte('[')};
  ws(arr);
  arr.push_back(GrammarBuilder::ref(next_first));
  ws(arr);
  arr.push_back(b_.byte(']'));
  return b_.choice({arr}, "array");
}

}  // namespace ds::grammar::json_schema
