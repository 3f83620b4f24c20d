// io/json.h: building, printing and parsing JSON; exact number round trips; error messages
// with line and column; duplicate keys and the depth limit.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/json.h"

using namespace qkgrad;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {
Json parse(std::string_view text) { return Json::parse(text, "test.json"); }
}  // namespace

TEST_CASE("Json: build, read back and dump compact and indented", "[json]") {
  Json cfg = Json::object();
  cfg.set("name", "qknorm");
  cfg.set("d_model", 512);
  cfg.set("dropout", 0.1);
  cfg.set("causal", true);
  cfg.set("nothing", nullptr);
  Json layers = Json::array();
  layers.push_back(1);
  layers.push_back(std::string("two"));
  cfg.set("layers", layers);
  cfg.set("empty", Json::object());
  cfg.set("d_model", int64_t{256});  // replaces, keeping the key's place

  CHECK(cfg.size() == 7);
  CHECK(cfg.contains("dropout"));
  CHECK_FALSE(cfg.contains("missing"));
  CHECK(cfg.at("d_model").as_int() == 256);
  CHECK(cfg.at("dropout").as_double() == 0.1);
  CHECK(cfg.at("causal").as_bool());
  CHECK(cfg.at("nothing").is_null());
  CHECK(cfg.at("name").as_string() == "qknorm");
  CHECK(cfg.at("layers")[1].as_string() == "two");
  CHECK(cfg.items()[1].first == "d_model");  // insertion order

  CHECK(cfg.dump() == R"({"name":"qknorm","d_model":256,"dropout":0.1,"causal":true,)"
                      R"("nothing":null,"layers":[1,"two"],"empty":{}})");
  CHECK(cfg.at("layers").dump(2) == "[\n  1,\n  \"two\"\n]");
  CHECK(parse(cfg.dump(4)).dump() == cfg.dump());
  CHECK(Json::array().dump(2) == "[]");
}

TEST_CASE("Json: numbers round-trip exactly", "[json]") {
  for (const double x : {0.1, 1e-300, 1.0 / 3.0, -2.5e17, 123456.789, 5e-324,
                         std::numeric_limits<double>::max(), 0.0}) {
    const std::string text = Json(x).dump();
    CAPTURE(x, text);
    CHECK(parse(text).as_double() == x);
  }
  CHECK(Json(0.1).dump() == "0.1");  // the shortest text that reads back exactly

  // Negative zero keeps its sign through text.
  const Json minus_zero = parse(Json(-0.0).dump());
  CHECK(Json(-0.0).dump() == "-0");
  CHECK(std::signbit(minus_zero.as_double()));
  CHECK(parse("-0").dump() == "-0");

  // Integers beyond 2^53 stay exact (a double would give 9007199254740992).
  const Json big = parse("9007199254740993");
  CHECK(big.is_integer());
  CHECK(big.as_int() == 9007199254740993);
  CHECK(big.dump() == "9007199254740993");
  CHECK(parse("-9223372036854775808").as_int() == std::numeric_limits<int64_t>::min());
  CHECK(Json(std::numeric_limits<int64_t>::max()).dump() == "9223372036854775807");
  // Too big for int64: kept as a double, so as_int refuses it rather than guess.
  const Json huge = parse("18446744073709551616");
  CHECK_FALSE(huge.is_integer());
  CHECK(huge.as_double() == 18446744073709551616.0);
  CHECK_THROWS_AS(huge.as_int(), Error);

  // Integral doubles up to 2^53 are accepted as integers; fractions are not.
  CHECK(parse("1e3").as_int() == 1000);
  CHECK_FALSE(parse("1e3").is_integer());
  CHECK(parse("1.0").dump() == "1");
  CHECK_THROWS_WITH(parse(R"({"n": 1.5})").at("n").as_int(),
                    Contains("expected an integer for 'n', got 1.5"));

  CHECK_THROWS_WITH(Json(std::nan("")).dump(), Contains("JSON has no NaN or infinity"));
  CHECK_THROWS_WITH(parse("1e400"), Contains("test.json:1:1: number 1e400 is out of the range"));
}

TEST_CASE("Json: strings with escapes and unicode round-trip", "[json]") {
  const std::string tricky = std::string("quote \" backslash \\ slash / newline \n tab \t ") +
                             "bell \x07 nul " + std::string(1, '\0') + " unit-sep \x1f end";
  const std::string text = Json(tricky).dump();
  CHECK(text.find('\n') == std::string::npos);
  CHECK_THAT(text, Contains("\\u0007") && Contains("\\u0000") && Contains("\\u001f") &&
                       Contains("\\n") && Contains("\\\""));
  CHECK(parse(text).as_string() == tricky);

  // \u escapes become UTF-8, including a surrogate pair (U+1F600) and U+00E9 / U+20AC.
  CHECK(parse(R"("caf\u00e9 \u20AC \ud83d\ude00 \/")").as_string() ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 /");
  // UTF-8 bytes (valid or not) pass through unchanged, both ways.
  const std::string bytes = "na\xC3\xAFve \xFF\xFE";
  CHECK(parse(Json(bytes).dump()).as_string() == bytes);
  CHECK(Json(bytes).dump() == "\"" + bytes + "\"");
}

TEST_CASE("Json: parse errors name the source, line and column", "[json][errors]") {
  CHECK_THROWS_WITH(Json::parse("{\n  \"a\": 1,\n  \"b\" 2\n}", "config.json"),
                    Equals("config.json:3:7: expected ':' after object key, got '2'"));
  CHECK_THROWS_WITH(parse("[1, 2,]"), Contains("test.json:1:7: expected a JSON value, got ']'"));
  CHECK_THROWS_WITH(parse("{\"a\": 1} x"),
                    Contains("test.json:1:10: unexpected 'x' after the end of the JSON value"));
  CHECK_THROWS_WITH(parse("[1] [2]"), Contains("1:5: unexpected '['"));
  CHECK_THROWS_WITH(parse(""), Contains("test.json:1:1: expected a JSON value, got the end"));
  CHECK_THROWS_WITH(parse("  \n "), Contains("test.json:2:2: expected a JSON value"));
  CHECK_THROWS_WITH(parse("[1, 2"), Contains("1:6: expected ',' or ']' in the array that starts "
                                             "at 1:1, got the end of the input"));
  CHECK_THROWS_WITH(parse("{\"a\" : 1 \"b\": 2}"), Contains("1:10: expected ',' or '}'"));
  CHECK_THROWS_WITH(parse("{1: 2}"), Contains("1:2: expected a string key"));
  CHECK_THROWS_WITH(parse("\"abc"), Contains("1:1: unterminated string"));
  CHECK_THROWS_WITH(parse("\"a\nb\""), Contains("1:3: control characters"));
  CHECK_THROWS_WITH(parse(R"("a\qb")"), Contains("1:3: invalid escape"));
  CHECK_THROWS_WITH(parse(R"("\u12G4")"), Contains("expected 4 hex digits"));
  CHECK_THROWS_WITH(parse(R"("\ud83d x")"), Contains("1:2: high surrogate"));
  CHECK_THROWS_WITH(parse(R"("\ud83d\u0041")"), Contains("high surrogate"));
  CHECK_THROWS_WITH(parse(R"("\ude00")"), Contains("unpaired low surrogate"));
  CHECK_THROWS_WITH(parse("01"), Contains("1:1: numbers must not have leading zeros"));
  CHECK_THROWS_WITH(parse("-"), Contains("expected a digit after '-'"));
  CHECK_THROWS_WITH(parse("1."), Contains("expected a digit after the decimal point"));
  CHECK_THROWS_WITH(parse("1e+"), Contains("expected a digit in the exponent"));
  CHECK_THROWS_WITH(parse("True"), Contains("expected a JSON value, got 'T'"));
  CHECK_THROWS_WITH(parse("nul"), Contains("did you mean 'null'?"));
  CHECK_THROWS_WITH(parse(std::string("[\x01]")), Contains("got byte 0x01"));
  CHECK_THROWS_WITH(parse("NaN"), Contains("expected a JSON value"));
}

TEST_CASE("Json: duplicate keys and deep nesting are refused", "[json][errors]") {
  CHECK_THROWS_WITH(parse("{\"a\": 1,\n \"b\": {\"x\": 1, \"x\": 2}}"),
                    Contains("test.json:2:16: duplicate key 'x' in an object"));
  CHECK_NOTHROW(parse(R"({"a": {"a": 1}})"));  // the same key in different objects is fine

  // 64 levels parse; 65 do not.
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK_NOTHROW(parse(nested(Json::kMaxDepth)));
  CHECK_THROWS_WITH(parse(nested(Json::kMaxDepth + 1)),
                    Contains("test.json:1:65: nesting is deeper than 64"));
  CHECK_THROWS_WITH(parse(std::string(100000, '[')), Contains("nesting is deeper than 64"));
  CHECK_THROWS_WITH(parse(std::string(100, '{')), Contains("expected a string key"));
}

TEST_CASE("Json: wrong kinds and missing keys name the value", "[json][errors]") {
  const Json cfg = parse(R"({"model": {"d_model": "512", "layers": [1, 2]}})");
  const Json& model = cfg.at("model");
  CHECK_THROWS_WITH(model.at("d_model").as_int(),
                    Equals("json: expected a number for 'model.d_model', got a string"));
  CHECK_THROWS_WITH(model.at("layers")[1].as_string(),
                    Equals("json: expected a string for 'model.layers[1]', got a number"));
  CHECK_THROWS_WITH(model.at("heads"),
                    Equals("json: missing key 'heads' in 'model'; add it to the file"));
  CHECK_THROWS_WITH(cfg.at("x"), Contains("missing key 'x' in the top-level object"));
  CHECK_THROWS_WITH(model.at("layers")[2],
                    Equals("json: index 2 is out of range for 'model.layers': the array has 2 "
                           "elements"));
  CHECK_THROWS_WITH(cfg.as_bool(), Equals("json: expected a boolean, got an object"));
  CHECK_THROWS_WITH(model.at("d_model").size(), Contains("expected an array or an object"));
  CHECK_THROWS_WITH(Json(1).push_back(2), Contains("expected an array to push_back into"));
  CHECK_THROWS_WITH(Json::array().set("k", 1), Contains("expected an object to set a key in"));
  CHECK(model.at("layers").path() == "model.layers");
}
