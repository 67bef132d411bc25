// python_json_dumps must write exactly what Python's json.dumps(ensure_ascii=False) writes: the
// encodings put its output into prompts, so a different byte is a different prompt.
#include "recipe/json_fields.h"

#include <gtest/gtest.h>

#include "recipe/request_error.h"

namespace ds::recipe {
namespace {

TEST(PythonJsonDumps, MatchesPythonSeparatorsEscapesAndKeyOrder) {
  // Expected strings are what CPython 3 prints for json.dumps(json.loads(s), ensure_ascii=False).
  const auto dumps = [](const char* text) { return python_json_dumps(Json::parse(text)); };
  EXPECT_EQ(dumps(R"({"b":1,"a":[1,2,{"c":null}],"d":true})"),
            R"({"b": 1, "a": [1, 2, {"c": null}], "d": true})");
  EXPECT_EQ(dumps(R"({})"), "{}");
  EXPECT_EQ(dumps(R"([])"), "[]");
  EXPECT_EQ(dumps(R"("line\nbreak \"q\" back\\slash tab\t")"), R"("line\nbreak \"q\" back\\slash tab\t")");
  EXPECT_EQ(dumps(R"("\u0001\u001f")"), R"("\u0001\u001f")");
  EXPECT_EQ(dumps(R"("天气 é")"), "\"天气 é\"");  // ensure_ascii=False: non-ASCII stays raw
  EXPECT_EQ(dumps(R"("a/b")"), R"("a/b")");       // "/" is not escaped
  EXPECT_EQ(dumps("[1.0, 0.5, -2, 1e-05, 12345678901234567890]"),
            "[1.0, 0.5, -2, 1e-05, 12345678901234567890]");
}

TEST(JsonFields, ReadersNameThePathAndTreatNullAsAbsent) {
  const Json obj =
      Json::parse(R"({"s":"x","n":null,"i":3,"f":2.0,"h":1.5,"b":true,"big":9223372036854775808})");
  EXPECT_EQ(*read_string(obj, "s", "p").value(), "x");
  EXPECT_FALSE(read_string(obj, "n", "p").value().has_value());
  EXPECT_FALSE(read_string(obj, "missing", "p").value().has_value());
  Result<std::optional<std::string>> wrong = read_string(obj, "i", "p");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(), "p.i: expected string, got number");
  EXPECT_EQ(*read_integer(obj, "i", "").value(), 3);
  EXPECT_EQ(*read_integer(obj, "f", "").value(), 2);
  EXPECT_EQ(error_field_path(read_integer(obj, "h", "").status()), "h");
  EXPECT_EQ(error_field_path(read_integer(obj, "big", "").status()), "big");
  EXPECT_TRUE(*read_bool(obj, "b", "").value());
  EXPECT_EQ(error_field_path(read_object(obj, "missing", "root").status()), "root.missing");
  EXPECT_EQ(error_field_path(read_array(obj, "s", "").status()), "s");
  EXPECT_EQ(error_field_path(parse_request_body("{\"a\":").status()), "body");
}

}  // namespace
}  // namespace ds::recipe
