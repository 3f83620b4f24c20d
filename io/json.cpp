// Json: the value type, the printer (dump) and a recursive-descent parser that reports the
// line and column of the first problem. See io/json.h.
#include "io/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>
#include <unordered_set>

#include "core/error.h"
#include "io/text.h"

namespace qkgrad {

std::string_view json_kind_name(Json::Kind kind) {
  switch (kind) {
    case Json::Kind::null: return "null";
    case Json::Kind::boolean: return "a boolean";
    case Json::Kind::number: return "a number";
    case Json::Kind::string: return "a string";
    case Json::Kind::array: return "an array";
    case Json::Kind::object: return "an object";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// The value
// ---------------------------------------------------------------------------------------------

Json Json::array() {
  Json j;
  j.kind_ = Kind::array;
  return j;
}

Json Json::object() {
  Json j;
  j.kind_ = Kind::object;
  return j;
}

namespace {
// The path of a child: "model" + "d_model" -> "model.d_model"; "layers" + 2 -> "layers[2]".
std::string child_path(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : cat(parent, ".", key);
}
std::string element_path(const std::string& parent, std::size_t index) {
  return cat(parent, "[", index, "]");
}
}  // namespace

std::string Json::describe_where() const { return path_.empty() ? "" : cat(" for '", path_, "'"); }

void Json::fail_kind(const char* expected) const {
  fail(cat("json: expected ", expected, describe_where(), ", got ", json_kind_name(kind_)));
}

void Json::push_back(Json value) {
  if (kind_ != Kind::array) fail_kind("an array to push_back into");
  value.path_ = element_path(path_, elements_.size());
  elements_.push_back(std::move(value));
}

void Json::set(std::string key, Json value) {
  if (kind_ != Kind::object) fail_kind("an object to set a key in");
  value.path_ = child_path(path_, key);
  for (auto& [k, v] : items_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::move(key), std::move(value));
}

bool Json::as_bool() const {
  if (kind_ != Kind::boolean) fail_kind("a boolean");
  return bool_;
}

double Json::as_double() const {
  if (kind_ != Kind::number) fail_kind("a number");
  return number_;
}

int64_t Json::as_int() const {
  if (kind_ != Kind::number) fail_kind("a number");
  if (is_int_) return int_;
  // A double is accepted only where it is certainly the integer the author meant: integral
  // and no larger than 2^53 (beyond that, neighbouring integers share one double).
  constexpr double kExact = 9007199254740992.0;  // 2^53
  QKGRAD_CHECK(std::trunc(number_) == number_ && std::fabs(number_) <= kExact, "json: expected ",
               "an integer", describe_where(), ", got ", number_,
               " (write it as an integer literal, without a fraction or exponent)");
  return static_cast<int64_t>(number_);
}

const std::string& Json::as_string() const {
  if (kind_ != Kind::string) fail_kind("a string");
  return string_;
}

const std::vector<Json>& Json::elements() const {
  if (kind_ != Kind::array) fail_kind("an array");
  return elements_;
}

const std::vector<std::pair<std::string, Json>>& Json::items() const {
  if (kind_ != Kind::object) fail_kind("an object");
  return items_;
}

std::size_t Json::size() const {
  if (kind_ == Kind::array) return elements_.size();
  if (kind_ == Kind::object) return items_.size();
  fail_kind("an array or an object");
}

const Json& Json::operator[](std::size_t index) const {
  const std::vector<Json>& e = elements();
  QKGRAD_CHECK(index < e.size(), "json: index ", index, " is out of range", describe_where(),
               ": the array has ", e.size(), " elements");
  return e[index];
}

const Json* Json::find(std::string_view key) const {
  for (const auto& [k, v] : items()) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool Json::contains(std::string_view key) const { return find(key) != nullptr; }

const Json& Json::at(std::string_view key) const {
  const Json* v = find(key);
  QKGRAD_CHECK(v != nullptr, "json: missing key '", key, "' in ",
               path_.empty() ? std::string("the top-level object") : cat("'", path_, "'"),
               "; add it to the file");
  return *v;
}

// ---------------------------------------------------------------------------------------------
// The printer
// ---------------------------------------------------------------------------------------------

namespace {

// Writes s as a JSON string literal: quotes, backslashes and control characters are escaped
// (\n, \t, ... or \u00XX); every other byte, including UTF-8 sequences, is copied as is.
void dump_string(std::string& out, std::string_view s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

void newline_and_indent(std::string& out, int indent, int level) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<std::size_t>(indent) * static_cast<std::size_t>(level), ' ');
}

}  // namespace

std::string Json::dump(int indent) const {
  std::string out;
  dump_to(out, indent, 0);
  return out;
}

void Json::dump_to(std::string& out, int indent, int level) const {
  switch (kind_) {
    case Kind::null: out += "null"; return;
    case Kind::boolean: out += bool_ ? "true" : "false"; return;
    case Kind::string: dump_string(out, string_); return;
    case Kind::number: {
      QKGRAD_CHECK(std::isfinite(number_), "json: cannot write ", number_, describe_where(),
                   ": JSON has no NaN or infinity; store it as a string or check the value");
      // std::to_chars with no precision gives the shortest text that reads back to exactly
      // the same double (0.1 -> "0.1", not "0.10000000000000001"), and unlike printf it
      // ignores the locale's decimal separator.
      char buf[32];
      const auto result = is_int_ ? std::to_chars(buf, buf + sizeof buf, int_)
                                  : std::to_chars(buf, buf + sizeof buf, number_);
      out.append(buf, result.ptr);
      return;
    }
    case Kind::array: {
      if (elements_.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (std::size_t i = 0; i < elements_.size(); ++i) {
        if (i > 0) out += ',';
        newline_and_indent(out, indent, level + 1);
        elements_[i].dump_to(out, indent, level + 1);
      }
      newline_and_indent(out, indent, level);
      out += ']';
      return;
    }
    case Kind::object: {
      if (items_.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i > 0) out += ',';
        newline_and_indent(out, indent, level + 1);
        dump_string(out, items_[i].first);
        out += indent < 0 ? ":" : ": ";
        items_[i].second.dump_to(out, indent, level + 1);
      }
      newline_and_indent(out, indent, level);
      out += '}';
      return;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The parser: one function per grammar rule of RFC 8259, reading text_ at pos_.
// ---------------------------------------------------------------------------------------------

class JsonParser {
 public:
  JsonParser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Json parse_document() {
    Json value = parse_value("", 0);
    skip_whitespace();
    if (!at_end()) error(cat("unexpected ", describe_next(), " after the end of the JSON value"));
    return value;
  }

 private:
  // Throws "source:line:column: message", both counted from 1 (columns in bytes).
  [[noreturn]] void error(const std::string& message) const { error_at(pos_, message); }
  [[noreturn]] void error_at(std::size_t pos, const std::string& message) const {
    fail(cat(source_, ":", line_column(pos), ": ", message));
  }

  // "3:14": the line and column of the byte at pos.
  std::string line_column(std::size_t pos) const {
    std::size_t line = 1, column = 1;
    for (std::size_t i = 0; i < pos && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return cat(line, ":", column);
  }

  // The next character for messages: "'x'", "byte 0x01" or "the end of the input".
  std::string describe_next() const {
    if (pos_ >= text_.size()) return "the end of the input";
    const auto c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7f) return cat("'", text_[pos_], "'");
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", c);
    return cat("byte ", buf);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  void skip_whitespace() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  void expect(char c, const char* context) {
    skip_whitespace();
    if (peek() != c) error(cat("expected '", c, "' ", context, ", got ", describe_next()));
    ++pos_;
  }

  Json parse_value(const std::string& path, int depth) {
    skip_whitespace();
    if (at_end()) error("expected a JSON value, got the end of the input");
    Json value;
    switch (peek()) {
      case '{': value = parse_object(path, depth + 1); break;
      case '[': value = parse_array(path, depth + 1); break;
      case '"': value = Json(parse_string()); break;
      case 't': parse_literal("true"); value = Json(true); break;
      case 'f': parse_literal("false"); value = Json(false); break;
      case 'n': parse_literal("null"); break;
      default:
        if (peek() == '-' || (peek() >= '0' && peek() <= '9')) {
          value = parse_number();
        } else {
          error(cat("expected a JSON value, got ", describe_next()));
        }
    }
    value.path_ = path;
    return value;
  }

  void parse_literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      error(cat("invalid literal; did you mean '", word, "'? (JSON literals are true, false and "
                "null, in lower case)"));
    }
    pos_ += word.size();
  }

  void check_depth(int depth) const {
    if (depth > Json::kMaxDepth) {
      error(cat("nesting is deeper than ", Json::kMaxDepth, " arrays/objects"));
    }
  }

  Json parse_object(const std::string& path, int depth) {
    check_depth(depth);
    const std::size_t start = pos_;
    ++pos_;  // '{'
    Json object = Json::object();
    std::unordered_set<std::string> keys;  // to reject duplicates without a quadratic search
    skip_whitespace();
    if (peek() == '}') {
      ++pos_;
      return object;
    }
    while (true) {
      skip_whitespace();
      if (peek() != '"') {
        error(cat("expected a string key in the object that starts at ", line_column(start),
                  ", got ", describe_next()));
      }
      const std::size_t key_pos = pos_;
      std::string key = parse_string();
      if (!keys.insert(key).second) {
        error_at(key_pos, cat("duplicate key '", key, "' in an object"));
      }
      expect(':', "after object key");
      Json value = parse_value(child_path(path, key), depth);
      object.items_.emplace_back(std::move(key), std::move(value));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == '}') {
        ++pos_;
        return object;
      }
      error(cat("expected ',' or '}' in the object that starts at ", line_column(start), ", got ",
                describe_next()));
    }
  }

  Json parse_array(const std::string& path, int depth) {
    check_depth(depth);
    const std::size_t start = pos_;
    ++pos_;  // '['
    Json array = Json::array();
    skip_whitespace();
    if (peek() == ']') {
      ++pos_;
      return array;
    }
    while (true) {
      array.elements_.push_back(parse_value(element_path(path, array.elements_.size()), depth));
      skip_whitespace();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() == ']') {
        ++pos_;
        return array;
      }
      error(cat("expected ',' or ']' in the array that starts at ", line_column(start), ", got ",
                describe_next()));
    }
  }

  // number = [ '-' ] int [ frac ] [ exp ], with int = '0' | [1-9][0-9]*
  Json parse_number() {
    const std::size_t start = pos_;
    auto digits = [&] {
      const std::size_t from = pos_;
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
      return pos_ - from;
    };
    if (peek() == '-') ++pos_;
    if (peek() == '0') {
      ++pos_;
      if (peek() >= '0' && peek() <= '9') error_at(start, "numbers must not have leading zeros");
    } else if (digits() == 0) {
      error("expected a digit after '-'");
    }
    bool integral = true;
    if (peek() == '.') {
      ++pos_;
      integral = false;
      if (digits() == 0) error("expected a digit after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      integral = false;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (digits() == 0) error("expected a digit in the exponent");
    }
    const std::string_view literal = text_.substr(start, pos_ - start);

    // The double, correctly rounded (std::from_chars, like to_chars, ignores the locale).
    Json number;
    number.kind_ = Json::Kind::number;
    const auto d = std::from_chars(literal.data(), literal.data() + literal.size(), number.number_);
    if (d.ec == std::errc::result_out_of_range) {
      error_at(start, cat("number ", literal, " is out of the range of a double"));
    }
    // The exact integer too, when the literal is one that fits in int64. "-0" stays a double,
    // so that negative zero survives a round trip.
    if (integral && literal != "-0") {
      const auto i = std::from_chars(literal.data(), literal.data() + literal.size(), number.int_);
      number.is_int_ = i.ec == std::errc();
    }
    return number;
  }

  // Four hex digits of a \u escape.
  unsigned parse_hex4() {
    unsigned value = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = peek();
      unsigned digit;
      if (c >= '0' && c <= '9') digit = static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f') digit = static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') digit = static_cast<unsigned>(c - 'A' + 10);
      else error("expected 4 hex digits after \\u");
      value = value * 16 + digit;
      ++pos_;
    }
    return value;
  }

  // A string literal; \uXXXX escapes become UTF-8 (a surrogate pair becomes one code point).
  std::string parse_string() {
    const std::size_t start = pos_;
    ++pos_;  // '"'
    std::string out;
    while (true) {
      if (at_end()) error_at(start, "unterminated string (no closing '\"')");
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        error("control characters (such as a newline or tab) must be escaped inside a string");
      }
      if (c != '\\') {
        out += c;  // any other byte, including the bytes of UTF-8 sequences, as is
        ++pos_;
        continue;
      }
      const std::size_t escape = pos_;
      ++pos_;  // '\'
      const char e = peek();
      ++pos_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = parse_hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) {
            error_at(escape, "unpaired low surrogate in a \\u escape");
          }
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // high surrogate: a low one must follow
            if (text_.substr(pos_, 2) != "\\u") {
              error_at(escape, "high surrogate in a \\u escape is not followed by a low one");
            }
            pos_ += 2;
            const unsigned low = parse_hex4();
            if (low < 0xDC00 || low > 0xDFFF) {
              error_at(escape, "high surrogate in a \\u escape is not followed by a low one");
            }
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, static_cast<char32_t>(cp));  // io/text.h
          break;
        }
        default:
          error_at(escape, "invalid escape in a string (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t "
                           "\\uXXXX)");
      }
    }
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

Json Json::parse(std::string_view text, std::string_view source_name) {
  return JsonParser(text, source_name).parse_document();
}

}  // namespace qkgrad
