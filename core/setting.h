// A setting written once. A struct of settings (nn/transformer.h's hyperparameters, a program's
// run settings) is declared as a table, one line a setting:
//
//   #define MY_SETTINGS(X)  (each line but the last ends with a backslash)
//     X(int64_t, heads, 8, Resume::fixed, range(1, 256), "attention heads")
//     X(double, lr, 1e-3, Resume::may_change, range(1e-9, 10), "peak learning rate")
//
//   X(type, name, default, resume rule, what it allows, help)
//
// QKGRAD_SETTING_MEMBER turns the table into the struct's members; QKGRAD_SETTING_VISIT into
// calls visit(SettingInfo, member), one a setting. From those visits a program makes its
// flags and --help (cli/setting_flags.h), its options.json and config files, and a
// checkpoint's model config (io/setting_json.h): a new setting is one line of its table.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace qkgrad {

// Whether a resumed run must keep a setting (the model, the data and their order) or may
// change it (the recipe, the budgets, evaluation, where it computes).
enum class Resume { fixed, may_change };

// What a setting allows: a number in [min, max], or a text among `choices` (none: any text).
// An enum-valued setting is written as one of its choices: the enum's value i is choices[i].
struct Allowed {
  double min = 0, max = 0;
  std::vector<std::string> choices;
};
inline Allowed range(double min, double max) { return {min, max, {}}; }
inline Allowed one_of(std::vector<std::string> choices) { return {0, 0, std::move(choices)}; }
inline Allowed any_text() { return {}; }

// One setting's description: its key (in JSON files; its flag is --key with - for _), whether
// a resumed run may change it, what it allows, and one line of help.
struct SettingInfo {
  const char* key;
  Resume resume;
  Allowed allowed;
  const char* help;
};

// The members of a settings table, and its visit (in a function with `self`, the struct, and
// `visit`, a callable taking (const SettingInfo&, member&)).
#define QKGRAD_SETTING_MEMBER(type, name, value, ...) type name = value;
#define QKGRAD_SETTING_VISIT(type, name, value, resume, allowed, help) \
  visit(::qkgrad::SettingInfo{#name, resume, allowed, help}, self.name);

// A setting's flag: --max-steps for max_steps.
inline std::string flag_name(const std::string& key) {
  std::string flag = key;
  for (char& c : flag) c = c == '_' ? '-' : c;
  return flag;
}

// An enum-valued setting's text (its choice), and back (false: not one of the choices).
template <typename Enum>
std::string enum_text(Enum value, const Allowed& allowed) {
  const auto i = static_cast<std::size_t>(value);
  QKGRAD_CHECK(i < allowed.choices.size(), "a setting's value ", i, " has no name among its ", allowed.choices.size(), " choices");
  return allowed.choices[i];
}
template <typename Enum>
bool enum_from_text(const std::string& text, const Allowed& allowed, Enum& value) {
  for (std::size_t i = 0; i < allowed.choices.size(); ++i) {
    if (allowed.choices[i] == text) {
      value = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

// "" when a value is one its setting allows; otherwise what it must be ("between 1 and 64",
// "one of f32, bf16").
inline std::string number_text(double x) {
  if (x == std::floor(x) && std::fabs(x) < 1e18) return std::to_string(static_cast<int64_t>(x));
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}
inline std::string one_of_text(const Allowed& allowed) {
  std::string text = "one of ";
  for (std::size_t i = 0; i < allowed.choices.size(); ++i) text += (i > 0 ? ", " : "") + allowed.choices[i];
  return text;
}
inline std::string disallowed(const std::string& value, const Allowed& allowed) {
  for (const std::string& choice : allowed.choices) {
    if (choice == value) return "";
  }
  return allowed.choices.empty() ? "" : one_of_text(allowed);
}
template <typename T>
std::string disallowed(const T& value, const Allowed& allowed) {
  if constexpr (std::is_enum_v<T>) {
    return static_cast<std::size_t>(value) < allowed.choices.size() ? "" : one_of_text(allowed);
  } else {
    const double x = static_cast<double>(value);
    if (x >= allowed.min && x <= allowed.max) return "";
    return cat("between ", number_text(allowed.min), " and ", number_text(allowed.max));
  }
}

}  // namespace qkgrad
