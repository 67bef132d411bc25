// A JSON Schema corpus generated after JSONSchemaBench's categories (flat, nested, enum-heavy,
// recursive $ref, string formats, bounded arrays, unions), seeded, so every run measures the same schemas.
#pragma once

#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace ds::bench {

struct CorpusSchema {
  std::string category;
  std::string text;
};

inline std::vector<CorpusSchema> make_schema_corpus(int per_category, uint32_t seed) {
  using nlohmann::ordered_json;
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng); };
  auto name = [&](int i) { return fmt::format("field_{}_{}", i, pick(1000)); };
  auto scalar = [&]() -> ordered_json {
    switch (pick(5)) {
      case 0:
        return {{"type", "string"}, {"maxLength", 5 + pick(30)}};
      case 1:
        return {{"type", "integer"}, {"minimum", -pick(100)}, {"maximum", pick(10000)}};
      case 2:
        return {{"type", "boolean"}};
      case 3:
        return {{"type", "number"}};
      default:
        return {{"type", "string"}};
    }
  };
  auto object_of = [&](int n, auto&& value) {
    ordered_json props = ordered_json::object();
    ordered_json required = ordered_json::array();
    for (int i = 0; i < n; ++i) {
      const std::string k = name(i);
      props[k] = value();
      if (pick(2)) required.push_back(k);
    }
    return ordered_json{
        {"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
  };
  std::vector<CorpusSchema> out;
  for (int s = 0; s < per_category; ++s) {
    out.push_back({"flat", object_of(4 + pick(12), scalar).dump()});
    auto nested = [&](auto&& self, int depth) -> ordered_json {
      if (depth == 0) return scalar();
      return object_of(2 + pick(3), [&] { return pick(3) ? self(self, depth - 1) : scalar(); });
    };
    out.push_back({"nested", nested(nested, 3 + pick(2)).dump()});
    out.push_back({"enum_heavy", object_of(3 + pick(5), [&] {
                                   ordered_json e = ordered_json::array();
                                   for (int i = 0, n = 5 + pick(40); i < n; ++i)
                                     e.push_back(fmt::format("value_{}", i * 7 + pick(5)));
                                   return ordered_json{{"enum", e}};
                                 }).dump()});
    ordered_json rec = {{"$defs",
                         {{"node",
                           {{"type", "object"},
                            {"properties",
                             {{"name", {{"type", "string"}, {"maxLength", 16}}},
                              {"children", {{"type", "array"}, {"items", {{"$ref", "#/$defs/node"}}}}}}},
                            {"required", {"name"}}}}}},
                        {"$ref", "#/$defs/node"}};
    out.push_back({"recursive_ref", rec.dump()});
    const char* formats[] = {"date", "time", "date-time", "email", "uuid", "uri", "ipv4"};
    out.push_back({"string_formats", object_of(3 + pick(5), [&] {
                                       return ordered_json{{"type", "string"}, {"format", formats[pick(7)]}};
                                     }).dump()});
    out.push_back({"bounded_arrays", object_of(2 + pick(4), [&] {
                                       const int lo = pick(3);
                                       return ordered_json{{"type", "array"},
                                                           {"items", scalar()},
                                                           {"minItems", lo},
                                                           {"maxItems", lo + 1 + pick(6)}};
                                     }).dump()});
    out.push_back({"unions", object_of(3 + pick(5), [&] {
                               return ordered_json{{"anyOf", {scalar(), {{"type", "null"}}, scalar()}}};
                             }).dump()});
  }
  return out;
}

// One schema of about `bytes` bytes: a wide object of nested objects (compile-time figure).
inline std::string make_large_schema(size_t bytes, uint32_t seed) {
  using nlohmann::ordered_json;
  std::mt19937 rng(seed);
  ordered_json props = ordered_json::object();
  for (int i = 0; props.dump().size() < bytes; ++i) {
    ordered_json inner = ordered_json::object();
    for (int j = 0; j < 4; ++j)
      inner[fmt::format("p{}", j)] =
          j % 2 ? ordered_json{{"type", "integer"}, {"minimum", 0}, {"maximum", int(rng() % 1000)}}
                : ordered_json{{"type", "string"}, {"maxLength", 20}};
    props[fmt::format("prop_{}", i)] = {{"type", "object"}, {"properties", inner}, {"required", {"p0"}}};
  }
  return ordered_json{{"type", "object"}, {"properties", props}}.dump();
}

}  // namespace ds::bench
