// io/json.h: qkgrad's rules on top of nlohmann::json. Printing (order kept, exact numbers,
// refusing NaN and invalid UTF-8), parsing (errors with file, line and column; duplicate keys
// and the depth limit refused) and reading fields with errors that name the key.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "io/json.h"

using namespace qkgrad;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {
Json parse(std::string_view text) { return parse_json(text, "test.json"); }
}  // namespace

TEST_CASE("Json: build, read back and dump compact and indented, keys in order", "[json]") {
  Json cfg = {{"name", "qknorm"}, {"d_model", 512}, {"dropout", 0.1}, {"causal", true}, {"nothing", nullptr}};
  cfg["layers"] = {1, "two"};
  cfg["empty"] = Json::object();
  cfg["d_model"] = int64_t{256};  // replaces, keeping the key's place

  const JsonFields f(cfg, "cfg.json");
  CHECK(cfg.size() == 7);
  CHECK(f.has("dropout"));
  CHECK_FALSE(f.has("missing"));
  CHECK(f.integer("d_model") == 256);
  CHECK(f.number("dropout") == 0.1);
  CHECK(f.boolean("causal"));
  CHECK(f.at("nothing").is_null());
  CHECK(f.string("name") == "qknorm");
  CHECK(cfg.begin().key() == "name");  // insertion order

  CHECK(dump_json(cfg) == R"({"name":"qknorm","d_model":256,"dropout":0.1,"causal":true,)"
                          R"("nothing":null,"layers":[1,"two"],"empty":{}})");
  CHECK(dump_json(cfg.at("layers"), 2) == "[\n  1,\n  \"two\"\n]");
  CHECK(dump_json(parse(dump_json(cfg, 4))) == dump_json(cfg));
  CHECK(dump_json(Json::array(), 2) == "[]");
}

TEST_CASE("Json: numbers round-trip exactly; integers stay int64", "[json]") {
  for (const double x : {0.1, 1e-300, 1.0 / 3.0, -2.5e17, 123456.789, 5e-324,
                         std::numeric_limits<double>::max(), 0.0, -0.0, 25.0}) {
    const std::string text = dump_json(Json(x));
    CAPTURE(x, text);
    const Json back = parse(text);
    CHECK(back.get<double>() == x);
    CHECK(std::signbit(back.get<double>()) == std::signbit(x));
  }
  CHECK(dump_json(Json(0.1)) == "0.1");  // the shortest text that reads back exactly
  CHECK(dump_json(Json(25.0)) == "25.0");  // a double stays a double through text

  // Integers beyond 2^53 stay exact (a double would give 9007199254740992).
  const Json big = parse("9007199254740993");
  CHECK(json_exact_int(big) == 9007199254740993);
  CHECK(dump_json(big) == "9007199254740993");
  CHECK(json_exact_int(parse("-9223372036854775808")) == std::numeric_limits<int64_t>::min());
  CHECK(dump_json(Json(std::numeric_limits<int64_t>::max())) == "9223372036854775807");
  // Too big for int64: no exact int64, so integer() refuses it rather than guess.
  CHECK_FALSE(json_exact_int(parse("18446744073709551615")).has_value());  // 2^64 - 1: unsigned
  CHECK_FALSE(json_exact_int(parse("18446744073709551616")).has_value());  // a double
  CHECK(parse("18446744073709551616").get<double>() == 18446744073709551616.0);

  // Integral doubles up to 2^53 are exact integers; fractions, larger doubles and strings are not.
  CHECK(json_exact_int(parse("1e3")) == 1000);
  CHECK(json_exact_int(parse("-0.0")) == 0);
  CHECK_FALSE(json_exact_int(parse("1.5")).has_value());
  CHECK_FALSE(json_exact_int(parse("1e300")).has_value());
  CHECK_FALSE(json_exact_int(parse("\"7\"")).has_value());
  CHECK_THROWS_WITH(JsonFields(parse(R"({"n": 1.5})"), "n.json").integer("n"),
                    Equals("n.json: 'n' must be an integer (that fits in 64 bits), got 1.5"));

  CHECK_THROWS_WITH(dump_json(Json{{"a", {{"lr", std::nan("")}}}}),
                    Equals("cannot write 'a.lr' as JSON: it is NaN, and JSON has no NaN or infinity"));
  CHECK_THROWS_WITH(dump_json(Json{1, std::numeric_limits<double>::infinity()}),
                    Contains("cannot write '[1]' as JSON: it is infinite"));
  CHECK_THROWS_WITH(parse("1e400"), Equals("test.json: number overflow parsing '1e400'"));
}

TEST_CASE("Json: strings with escapes and unicode round-trip; invalid UTF-8 is refused both ways", "[json]") {
  const std::string tricky = std::string("quote \" backslash \\ slash / newline \n tab \t ") +
                             "bell \x07 nul " + std::string(1, '\0') + " unit-sep \x1f end";
  const std::string text = dump_json(Json(tricky));
  CHECK(text.find('\n') == std::string::npos);
  CHECK_THAT(text, Contains("\\u0007") && Contains("\\u0000") && Contains("\\u001f") &&
                       Contains("\\n") && Contains("\\\""));
  CHECK(parse(text).get<std::string>() == tricky);

  // \u escapes become UTF-8, including a surrogate pair (U+1F600) and U+00E9 / U+20AC.
  CHECK(parse(R"("caf\u00e9 \u20AC \ud83d\ude00 \/")").get<std::string>() ==
        "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 /");
  // Valid UTF-8 is written as it is, not escaped.
  CHECK(dump_json(Json("na\xC3\xAFve")) == "\"na\xC3\xAFve\"");
  // JSON text is UTF-8: bytes that are not are refused when read and when written, by name.
  CHECK_THROWS_WITH(parse("{\"a\": \"na\xFF\"}"), Contains("test.json:1:10: ") && Contains("ill-formed UTF-8"));
  CHECK_THROWS_WITH(dump_json(Json{{"data", "/corpora/caf\xE9"}}),
                    Equals("cannot write 'data' as JSON: the string is not valid UTF-8 (byte 12), and JSON text is UTF-8"));
  CHECK_THROWS_WITH(dump_json(Json{{"ok", {{"caf\xE9", 1}}}}), Contains("cannot write a key of 'ok' as JSON"));
}

TEST_CASE("Json: parse errors name the source, line and column", "[json][errors]") {
  CHECK_THROWS_WITH(parse_json("{\n  \"a\": 1,\n  \"b\" 2\n}", "config.json"),
                    Equals("config.json:3:7: syntax error while parsing object separator - unexpected number "
                           "literal; expected ':'"));
  CHECK_THROWS_WITH(parse("[1, 2,]"), Contains("test.json:1:7: ") && Contains("unexpected ']'"));
  CHECK_THROWS_WITH(parse("{\"a\": 1} x"), Contains("test.json:1:10: ") && Contains("expected end of input"));
  CHECK_THROWS_WITH(parse("[1] [2]"), Contains("test.json:1:5: ") && Contains("expected end of input"));
  CHECK_THROWS_WITH(parse(""), Contains("test.json:1:1: ") && Contains("unexpected end of input"));
  CHECK_THROWS_WITH(parse("  \n "), Contains("test.json:2:2: ") && Contains("unexpected end of input"));
  CHECK_THROWS_WITH(parse("[1, 2"), Contains("test.json:1:6: ") && Contains("expected ']'"));
  CHECK_THROWS_WITH(parse("{\"a\" : 1 \"b\": 2}"), Contains("test.json:1:12: ") && Contains("expected '}'"));
  CHECK_THROWS_WITH(parse("{1: 2}"), Contains("test.json:1:2: ") && Contains("expected string literal"));
  CHECK_THROWS_WITH(parse("\"abc"), Contains("test.json:1:5: ") && Contains("missing closing quote"));
  CHECK_THROWS_WITH(parse("\"a\nb\""), Contains("test.json:1:3: ") && Contains("control character U+000A"));
  CHECK_THROWS_WITH(parse(R"("a\qb")"), Contains("1:4: ") && Contains("forbidden character after backslash"));
  CHECK_THROWS_WITH(parse(R"("\u12G4")"), Contains("'\\u' must be followed by 4 hex digits"));
  CHECK_THROWS_WITH(parse(R"("\ud83d x")"), Contains("surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF"));
  CHECK_THROWS_WITH(parse(R"("\ude00")"), Contains("surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF"));
  CHECK_THROWS_WITH(parse("01"), Contains("test.json:1:2: ") && Contains("expected end of input"));
  CHECK_THROWS_WITH(parse("-"), Contains("invalid number"));
  CHECK_THROWS_WITH(parse("1."), Contains("invalid number"));
  CHECK_THROWS_WITH(parse("1e+"), Contains("invalid number"));
  CHECK_THROWS_WITH(parse("True"), Contains("1:1: ") && Contains("invalid literal"));
  CHECK_THROWS_WITH(parse("nul"), Contains("invalid literal; last read: 'nul'"));
  CHECK_THROWS_WITH(parse(std::string("[\x01]")), Contains("control character U+0001") || Contains("invalid literal"));
  CHECK_THROWS_WITH(parse("NaN"), Contains("invalid literal"));
  CHECK_THROWS_WITH(parse("[1, // no comments\n 2]"), Contains("test.json:1:5: "));
}

TEST_CASE("Json: duplicate keys and deep nesting are refused", "[json][errors]") {
  CHECK_THROWS_WITH(parse("{\"a\": 1,\n \"b\": {\"x\": 1, \"x\": 2}}"),
                    Equals("test.json: duplicate key 'x' in 'b' (which one was meant? keep one)"));
  CHECK_THROWS_WITH(parse(R"({"m": [1, {"k": 1}, {"y": 1, "y": 2}]})"), Contains("duplicate key 'y' in 'm[2]'"));
  CHECK_THROWS_WITH(parse(R"({"a": 1, "a": 1})"), Contains("duplicate key 'a' in the top-level object"));
  CHECK_NOTHROW(parse(R"({"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]})"));  // the same key in different objects

  // 64 levels parse; 65 do not, nor do 100,000 (refused at the 65th, without recursion).
  const auto nested = [](int depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  CHECK_NOTHROW(parse(nested(kJsonMaxDepth)));
  CHECK_THROWS_WITH(parse(nested(kJsonMaxDepth + 1)), Contains("test.json: arrays and objects are nested deeper than 64"));
  CHECK_THROWS_WITH(parse(std::string(100000, '[')), Contains("nested deeper than 64"));
  CHECK_THROWS_WITH(parse(std::string(100, '{')), Contains("expected string literal"));
}

TEST_CASE("Json: wrong kinds and missing keys name the file and the key", "[json][errors]") {
  const Json cfg = parse(R"({"model": {"d_model": "512", "layers": [1, 2], "on": 1}, "x": 1})");
  const JsonFields top(cfg, "cfg.json");
  const JsonFields model = top.object("model");
  CHECK(model.path_of("d_model") == "model.d_model");
  CHECK_THROWS_WITH(model.integer("d_model"),
                    Equals("cfg.json: 'model.d_model' must be an integer (that fits in 64 bits), got \"512\" (a string)"));
  CHECK_THROWS_WITH(model.string("layers"), Equals("cfg.json: 'model.layers' must be a string, got an array"));
  CHECK_THROWS_WITH(model.boolean("on"), Equals("cfg.json: 'model.on' must be true or false, got 1"));
  CHECK_THROWS_WITH(model.number("layers"), Contains("'model.layers' must be a number"));
  CHECK_THROWS_WITH(model.at("heads"), Equals("cfg.json: missing key 'model.heads'; add it to the file"));
  CHECK_THROWS_WITH(top.object("x"), Equals("cfg.json: 'x' must be a JSON object, got 1"));
  CHECK_THROWS_WITH(JsonFields(parse("[1]"), "list.json"), Equals("list.json: the file must be a JSON object, got an array"));
  CHECK_THROWS_WITH(JsonFields(parse("{}"), "").integer("n"), Equals("missing key 'n'; add it to the file"));
  CHECK(json_kind_name(parse("null")) == "null");
  CHECK(json_kind_name(parse("2")) == "a number");
}
