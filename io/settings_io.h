// A struct of settings (core/setting.h) as JSON and as a settings file, for any program. The
// struct says what its settings are with a static `for_each(self, visit)` that calls
// visit(const SettingInfo&, member&) for each; these functions do the rest:
//
//   settings_to_json, settings_from_json   options.json: every setting under its key
//   check_setting_values                   each value in its range or among its choices
//   find_setting                           a key's description (its resume rule, its range)
//   read_settings_file                     `--config FILE`: TOML lines `key = value`, or JSON
//   settings_file_text                     the settings as such a file (`--dump-config`)
//
// Every error names the file (and line) and the key.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/setting.h"
#include "io/json.h"
#include "io/setting_json.h"

namespace qkgrad {

template <typename Settings>
Json settings_to_json(const Settings& s) {
  Json j = Json::object();
  Settings::for_each(s, [&](const SettingInfo& info, const auto& value) { j[info.key] = setting_to_json(value, info); });
  return j;
}

// Throws naming `source` (a file, or "" for flags), the key and what it allows when a setting
// is out of its range or not one of its choices.
template <typename Settings>
void check_setting_values(const Settings& s, const std::string& source) {
  Settings::for_each(s, [&](const SettingInfo& info, const auto& value) {
    const std::string must = disallowed(value, info.allowed);
    QKGRAD_CHECK(must.empty(), source.empty() ? "" : source + ": ", "'", info.key, "' must be ", must, ", got ",
                 setting_to_json(value, info).dump());
  });
}

// Takes every key `json` has into `s` (the others keep their values: a file of an older
// program, which lacks newer keys, keeps the base's), then checks every value. A key of the
// wrong kind is an error naming `source` and the key.
template <typename Settings>
void settings_from_json(const Json& json, const std::string& source, Settings& s) {
  const JsonFields fields(json, source);
  Settings::for_each(s, [&](const SettingInfo& info, auto& value) {
    if (fields.has(info.key)) setting_from_json(fields, info, value);
  });
  check_setting_values(s, source);
}

template <typename Settings>
std::optional<SettingInfo> find_setting(const std::string& key) {
  std::optional<SettingInfo> found;
  const Settings any;
  Settings::for_each(any, [&](const SettingInfo& info, const auto&) {
    if (key == info.key) found = info;
  });
  return found;
}

// ---- settings files ----

// One `key = value` of a TOML file: the value as CLI11 reads it (a string without its quotes)
// and where it is ("exp.toml:3"). Sections and lists are refused naming the line.
struct SettingsFileEntry {
  std::string key, value, where;
};
std::vector<SettingsFileEntry> read_toml_entries(const std::string& path, const std::string& text);

// A TOML value as the JSON of a setting's kind; throws std::invalid_argument saying the kind.
Json toml_value(const std::string& value, const int64_t&);
Json toml_value(const std::string& value, const double&);
Json toml_value(const std::string& value, const std::string&);
template <typename Enum>
  requires std::is_enum_v<Enum>
Json toml_value(const std::string& value, const Enum&) {
  return value;  // its name, checked against the choices when it is applied
}

// The file's text (at most 1 MiB), or an error naming `--config PATH`.
std::string read_settings_file_text(const std::string& path);
bool is_json_path(const std::string& path);

// `--config FILE`: TOML (`key = value` lines, `#` comments), or, for a FILE ending in .json, a
// JSON object such as a run's options.json. The result is a JSON object of the keys the file
// gives, each of its setting's kind (apply it with settings_from_json); an unknown key, a
// section, a list or a value of the wrong kind is an error naming FILE(:LINE) and the key.
// `keys_hint` ends the unknown key's message ("see train --dump-config").
template <typename Settings>
Json read_settings_file(const std::string& path, const std::string& keys_hint) {
  const std::string text = read_settings_file_text(path);
  const Settings types;
  Json out = Json::object();
  if (is_json_path(path)) {
    out = parse_json(text, path);
    QKGRAD_CHECK(out.is_object(), path, ": must be a JSON object of settings");
    for (const auto& item : out.items()) {
      QKGRAD_CHECK(find_setting<Settings>(item.key()).has_value(), path, ": unknown setting '", item.key(), "' (", keys_hint, ")");
    }
  } else {
    for (const SettingsFileEntry& e : read_toml_entries(path, text)) {
      bool known = false;
      Settings::for_each(types, [&](const SettingInfo& info, const auto& kind) {
        if (e.key != info.key) return;
        known = true;
        try {
          out[e.key] = toml_value(e.value, kind);
        } catch (const std::invalid_argument& kind_name) {
          fail(cat(e.where, ": '", e.key, "' must be ", kind_name.what(), ", got '", e.value, "'"));
        }
      });
      QKGRAD_CHECK(known, e.where, ": unknown setting '", e.key, "' (", keys_hint, ")");
    }
  }
  Settings checked = types;
  settings_from_json(out, path, checked);  // the kinds and values, with errors naming the key
  return out;
}

// The JSON object of settings as a file that read_settings_file reads back: `header` (a comment
// line), then `key = value` lines, each with a comment saying where its value came from when
// `origin` names it ("preset demo", "--config exp.toml", "--lr").
std::string settings_file_text(const Json& settings, const std::string& header,
                               const std::map<std::string, std::string>& origin = {});

// The presets of a program side by side (train --help), from their settings as JSON: a column
// a preset, a row a setting whose value differs between them or is named in `always` (the
// others are their flags' defaults); "preset" and "data" are left out. `footnote` ends it.
std::string presets_side_by_side(const std::vector<std::pair<std::string, Json>>& presets,
                                 const std::vector<std::string>& always, const std::string& footnote);

}  // namespace qkgrad
