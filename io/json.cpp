// JSON on nlohmann::json: parsing with qkgrad's refusals (duplicate keys, deep nesting) and
// errors that name the file, line and column; printing that refuses what JSON cannot hold;
// reading an object's fields with errors that name the key. See io/json.h.
#include "io/json.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "core/error.h"
#include "io/text.h"

namespace qkgrad {

namespace {

// ---- parsing ----

// The parser calls this at each event; it tracks the open arrays and objects (one frame each)
// so that a duplicate key can be named by its path, and refuses nesting past the limit.
class StructureCheck {
 public:
  explicit StructureCheck(std::string_view source) : source_(source) {}

  bool operator()(int depth, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    switch (event) {
      case Event::object_start:
      case Event::array_start:
        if (depth >= kJsonMaxDepth) {
          fail(cat(source_, ": arrays and objects are nested deeper than ", kJsonMaxDepth,
                   " levels (the file is corrupt, or not what it should be)"));
        }
        frames_.push_back({event == Event::object_start, {}, {}, 0});
        break;
      case Event::key: {
        Frame& frame = frames_.back();
        frame.key = parsed.get<std::string>();
        if (!frame.keys.insert(frame.key).second) {
          const std::string where = path(frames_.size() - 1);
          fail(cat(source_, ": duplicate key '", frame.key, "' in ",
                   where.empty() ? std::string("the top-level object") : cat("'", where, "'"),
                   " (which one was meant? keep one)"));
        }
        break;
      }
      case Event::object_end:
      case Event::array_end:
        frames_.pop_back();
        count_element();
        break;
      case Event::value:
        count_element();
        break;
    }
    return true;  // keep every value
  }

 private:
  struct Frame {
    bool is_object;
    std::set<std::string> keys;  // of an object, so far
    std::string key;             // of an object: the key being read
    std::size_t index;           // of an array: the element being read
  };

  void count_element() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().index;
  }

  // The path of the value being read inside the first `levels` frames: "model.layers[2]".
  std::string path(std::size_t levels) const {
    std::string out;
    for (std::size_t i = 0; i < levels; ++i) {
      const Frame& f = frames_[i];
      out += f.is_object ? cat(out.empty() ? "" : ".", f.key) : cat("[", f.index, "]");
    }
    return out;
  }

  std::string source_;
  std::vector<Frame> frames_;
};

// "SOURCE:LINE:COLUMN: what" for a syntax error: nlohmann's message less its "[json.exception.
// parse_error.101] parse error at line 3, column 7: " prefix, with the line and column of the
// last byte the parser read (counted here from e.byte, so that a lookahead newline gives the end
// of its line, not column 0 of the next). "SOURCE: what" for errors without a position.
std::string parse_error_message(const nlohmann::json::exception& e, std::string_view text, std::string_view source) {
  std::string message = e.what();
  if (const std::size_t end = message.find("] "); end != std::string::npos) message.erase(0, end + 2);
  const auto* parse_error = dynamic_cast<const nlohmann::json::parse_error*>(&e);
  if (parse_error == nullptr || parse_error->byte == 0) return cat(source, ": ", message);
  if (const std::size_t colon = message.find(": "); message.rfind("parse error", 0) == 0 && colon != std::string::npos) {
    message.erase(0, colon + 2);
  }
  const std::size_t last = std::min(parse_error->byte - 1, text.size());  // 0-based
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < last; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return cat(source, ":", line, ":", last - line_start + 1, ": ", message);
}

// ---- printing ----

std::string child_path(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : cat(parent, ".", key);
}

std::string named(const std::string& path) { return path.empty() ? "the top-level value" : cat("'", path, "'"); }

// Throws naming the first value under `value` that JSON text cannot hold.
void check_printable(const Json& value, const std::string& path) {
  if (value.is_number_float() && !std::isfinite(value.get<double>())) {
    fail(cat("cannot write ", named(path), " as JSON: it is ", std::isnan(value.get<double>()) ? "NaN" : "infinite",
             ", and JSON has no NaN or infinity"));
  }
  if (value.is_string()) {
    const std::size_t bad = first_invalid_utf8(value.get_ref<const std::string&>());
    QKGRAD_CHECK(bad == std::string_view::npos, "cannot write ", named(path),
                 " as JSON: the string is not valid UTF-8 (byte ", bad, "), and JSON text is UTF-8");
  }
  if (value.is_array()) {
    for (std::size_t i = 0; i < value.size(); ++i) check_printable(value[i], cat(path, "[", i, "]"));
  }
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      QKGRAD_CHECK(first_invalid_utf8(key) == std::string_view::npos, "cannot write a key of ", named(path),
                   " as JSON: it is not valid UTF-8, and JSON text is UTF-8");
      check_printable(child, child_path(path, key));
    }
  }
}

// A short description of a value for error messages: `2.5`, `"512" (a string)`, `an array`.
std::string describe(const Json& value) {
  if (value.is_number() || value.is_boolean()) return value.dump();
  if (value.is_string()) {
    std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
    if (text.size() > 40) text = text.substr(0, 36) + "...\"";
    return cat(text, " (a string)");
  }
  return std::string(json_kind_name(value));
}

}  // namespace

Json parse_json(std::string_view text, std::string_view source) {
  StructureCheck check(source);
  try {
    return Json::parse(text.begin(), text.end(), std::ref(check));
  } catch (const nlohmann::json::exception& e) {
    fail(parse_error_message(e, text, source));
  }
}

std::string dump_json(const Json& value, int indent) {
  check_printable(value, "");
  return value.dump(indent);
}

std::string_view json_kind_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "a number";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::binary: return "binary data";
    case Json::value_t::discarded: return "nothing";
  }
  return "?";
}

std::optional<int64_t> json_exact_int(const Json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
    return std::nullopt;
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    const double d = value.get<double>();
    constexpr double kExact = 9007199254740992.0;  // 2^53
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= kExact) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// ---- JsonFields ----

JsonFields::JsonFields(const Json& object, std::string source, std::string path)
    : object_(object), source_(std::move(source)), path_(std::move(path)) {
  QKGRAD_CHECK(object_.is_object(), source_prefix(), path_.empty() ? std::string("the file") : cat("'", path_, "'"),
               " must be a JSON object, got ", describe(object_));
}

std::string JsonFields::source_prefix() const { return source_.empty() ? "" : cat(source_, ": "); }

std::string JsonFields::path_of(std::string_view key) const { return child_path(path_, std::string(key)); }

bool JsonFields::has(std::string_view key) const { return object_.contains(std::string(key)); }

const Json& JsonFields::at(std::string_view key) const {
  const auto it = object_.find(std::string(key));
  if (it == object_.end()) fail(cat(source_prefix(), "missing key '", path_of(key), "'; add it to the file"));
  return *it;
}

void JsonFields::fail_kind(std::string_view key, std::string_view expected) const {
  fail(cat(source_prefix(), "'", path_of(key), "' must be ", expected, ", got ", describe(at(key))));
}

int64_t JsonFields::integer(std::string_view key) const {
  const std::optional<int64_t> value = json_exact_int(at(key));
  if (!value) fail_kind(key, "an integer (that fits in 64 bits)");
  return *value;
}

double JsonFields::number(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_number()) fail_kind(key, "a number");
  return value.get<double>();
}

bool JsonFields::boolean(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_boolean()) fail_kind(key, "true or false");
  return value.get<bool>();
}

const std::string& JsonFields::string(std::string_view key) const {
  const Json& value = at(key);
  if (!value.is_string()) fail_kind(key, "a string");
  return value.get_ref<const std::string&>();
}

JsonFields JsonFields::object(std::string_view key) const { return JsonFields(at(key), source_, path_of(key)); }

}  // namespace qkgrad
