// JSON: nlohmann::json (Debian nlohmann-json3-dev) as the value type, with the rules qkgrad's
// files need on top of it, in one place:
//
//   Json cfg = parse_json(text, "config.json");     // "config.json:3:14: ..." on a syntax error;
//                                                    // duplicate keys and nesting > 64 refused
//   JsonFields model(cfg.at("model"), "config.json", "model");
//   int64_t d = model.integer("d_model");           // "config.json: 'model.d_model' must be an
//                                                    //   integer, got "512" (a string)"
//   Json out = {{"lr", 0.001}, {"layers", Json::array()}};   // nlohmann's own building API
//   std::string text = dump_json(out, 2);           // refuses NaN, infinity and invalid UTF-8
//
// Why the rules: configuration and checkpoint files are edited by hand and by other programs,
// so a mistake must be named (file, line, key), never guessed at. nlohmann alone would keep the
// last of two equal keys, write NaN as null, and read 1.5 as the integer 1.
// - Objects keep their keys in the order they were written (ordered_json), as files show them.
// - Integers stay exact int64 (safetensors byte offsets can exceed 2^53, where doubles stop
//   being exact); integer() also takes an integral double up to 2^53 ("1e3"), nothing else.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace qkgrad {

using Json = nlohmann::ordered_json;

inline constexpr int kJsonMaxDepth = 64;  // arrays and objects nested deeper are refused

// Parses a whole document (RFC 8259). Throws qkgrad::Error naming `source`, the line and the
// column of a syntax error ("config.json:3:7: ..."), or the key of a duplicate ("config.json:
// duplicate key 'x' in 'model.layers[2]'"), or where nesting gets deeper than kJsonMaxDepth.
Json parse_json(std::string_view text, std::string_view source);

// The text of `value`: compact on one line when indent < 0, else one item per line indented by
// `indent` spaces per level. Doubles print with the digits that read back to the same double.
// Throws qkgrad::Error naming the key of a NaN or infinity (JSON has none) or of a string that
// is not valid UTF-8 (JSON text is UTF-8).
std::string dump_json(const Json& value, int indent = -1);

// "null", "a boolean", "a number", "a string", "an array", "an object".
std::string_view json_kind_name(const Json& value);

// The exact integer `value` holds: an integer literal that fits in int64, or an integral double
// of magnitude <= 2^53. Empty for anything else (1.5, 1e300, "7", 2^64).
std::optional<int64_t> json_exact_int(const Json& value);

// Reading the fields of one JSON object, with errors that name the source and the key's path:
// "options.json: 'model.heads' must be an integer, got 2.5". Holds a reference to the object.
class JsonFields {
 public:
  // Throws when `object` is not a JSON object. `path` is where it sits ("" at the top level).
  JsonFields(const Json& object, std::string source, std::string path = "");

  bool has(std::string_view key) const;
  const Json& at(std::string_view key) const;  // throws naming a missing key
  int64_t integer(std::string_view key) const;
  double number(std::string_view key) const;
  bool boolean(std::string_view key) const;
  const std::string& string(std::string_view key) const;
  JsonFields object(std::string_view key) const;

  const Json& json() const { return object_; }
  std::string path_of(std::string_view key) const;  // "model.heads"
  std::string source_prefix() const;                // "options.json: ", or "" without a source

 private:
  [[noreturn]] void fail_kind(std::string_view key, std::string_view expected) const;

  const Json& object_;
  std::string source_;
  std::string path_;
};

}  // namespace qkgrad
