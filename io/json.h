// Json: a small JSON value, parser and printer, enough for configuration files and the
// header of a safetensors checkpoint (io/safetensors.h). Not a general-purpose library:
// it favours clear error messages over speed.
//
//   Json cfg = Json::parse(text, "config.json");      // throws "config.json:3:14: ..." on errors
//   int64_t d = cfg.at("d_model").as_int();             // throws "json: expected a number for
//                                                       //   'd_model', got a string"
//   Json out = Json::object();
//   out.set("lr", 0.001);
//   out.set("layers", Json::array());
//   std::string text = out.dump(2);                     // pretty-printed, 2 spaces per level
//
// Kinds: null, boolean, number, string, array, object.
// - Objects keep their keys in insertion order (a vector of key/value pairs, searched
//   linearly: objects here are small).
// - A number keeps a double, and also the exact int64_t when its literal was an integer that
//   fits (safetensors byte offsets can exceed 2^53, where doubles stop being exact).
// - Each value remembers where it sits ("model.layers[2].d_model") so that a wrong-kind error
//   can say which value was wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qkgrad {

class Json {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  // ---- construction ----
  Json() = default;  // null
  Json(std::nullptr_t) {}
  Json(bool value) : kind_(Kind::boolean), bool_(value) {}
  Json(double value) : kind_(Kind::number), number_(value) {}
  Json(int64_t value)
      : kind_(Kind::number), number_(static_cast<double>(value)), int_(value), is_int_(true) {}
  Json(int value) : Json(static_cast<int64_t>(value)) {}
  Json(const char* value) : kind_(Kind::string), string_(value) {}
  Json(std::string value) : kind_(Kind::string), string_(std::move(value)) {}
  static Json array();   // an empty array
  static Json object();  // an empty object

  // ---- building arrays and objects ----
  void push_back(Json value);            // this must be an array
  void set(std::string key, Json value);  // this must be an object; replaces an existing key

  // ---- kind ----
  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::null; }
  bool is_bool() const { return kind_ == Kind::boolean; }
  bool is_number() const { return kind_ == Kind::number; }
  bool is_integer() const { return kind_ == Kind::number && is_int_; }  // an exact int64 literal
  bool is_string() const { return kind_ == Kind::string; }
  bool is_array() const { return kind_ == Kind::array; }
  bool is_object() const { return kind_ == Kind::object; }

  // ---- reading (each throws qkgrad::Error naming the value when the kind is wrong) ----
  bool as_bool() const;
  double as_double() const;
  // The exact integer: a number written as an integer that fits in int64, or a double with an
  // integral value of magnitude <= 2^53 (where doubles are still exact).
  int64_t as_int() const;
  const std::string& as_string() const;
  const std::vector<Json>& elements() const;                       // of an array
  const std::vector<std::pair<std::string, Json>>& items() const;  // of an object, in order

  std::size_t size() const;                          // elements of an array or items of an object
  const Json& operator[](std::size_t index) const;   // array element; throws when out of range
  bool contains(std::string_view key) const;         // object has key
  const Json& at(std::string_view key) const;        // object value; throws naming a missing key
  const Json* find(std::string_view key) const;      // object value, or nullptr

  // Where this value sits, for error messages: "model.layers[2]" for a parsed value, empty
  // for the top level. set() and push_back() give the value its key or index within its
  // container (values nested inside it keep the paths they had).
  const std::string& path() const { return path_; }

  // ---- text ----
  // indent < 0: compact, on one line. indent >= 0: one item per line, indented by that many
  // spaces per level. Doubles are printed with the fewest digits that read back to exactly
  // the same double; integers without a decimal point. Throws for NaN or infinity, which
  // JSON cannot represent.
  std::string dump(int indent = -1) const;

  // Parses a whole document (RFC 8259). Throws qkgrad::Error naming the source, line and
  // column of the first problem: "config.json:3:14: expected ':' after object key".
  // Rejects trailing garbage, duplicate keys, nesting deeper than kMaxDepth and invalid
  // escapes; bytes that are not valid UTF-8 pass through unchanged.
  static Json parse(std::string_view text, std::string_view source_name);
  static constexpr int kMaxDepth = 64;

 private:
  friend class JsonParser;
  void dump_to(std::string& out, int indent, int level) const;
  std::string describe_where() const;  // " for 'path'", or "" at the top level
  [[noreturn]] void fail_kind(const char* expected) const;

  Kind kind_ = Kind::null;
  bool bool_ = false;
  double number_ = 0.0;
  int64_t int_ = 0;
  bool is_int_ = false;
  std::string string_;
  std::vector<Json> elements_;
  std::vector<std::pair<std::string, Json>> items_;
  std::string path_;
};

// "null", "a boolean", "a number", "a string", "an array", "an object".
std::string_view json_kind_name(Json::Kind kind);

}  // namespace qkgrad
