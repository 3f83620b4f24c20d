// Settings files (io/settings_io.h): the TOML reading and the text, the parts that do not
// depend on the struct of settings.
#include "io/settings_io.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "io/atomic_file.h"

namespace qkgrad {

namespace {

// The 1-based line of `text` where `key = ...` is written (0 if none is found).
int64_t line_of_key(const std::string& text, const std::string& key) {
  std::istringstream lines(text);
  int64_t number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, key.size(), key) != 0) continue;
    const std::size_t after = line.find_first_not_of(" \t", start + key.size());
    if (after != std::string::npos && line[after] == '=') return number;
  }
  return 0;
}

}  // namespace

std::vector<SettingsFileEntry> read_toml_entries(const std::string& path, const std::string& text) {
  std::istringstream in(text);
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_config(in);
  } catch (const std::exception& e) {
    fail(cat(path, ": not a TOML settings file: ", e.what()));
  }
  std::vector<SettingsFileEntry> entries;
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // CLI11's marks around a [section]
    const int64_t line = line_of_key(text, item.name);
    const std::string where = line > 0 ? cat(path, ":", line) : path;
    QKGRAD_CHECK(item.parents.empty(), where, ": '", item.name, "' is in the section [", CLI::detail::join(item.parents, "."),
                 "]; the settings are top-level keys (no sections)");
    QKGRAD_CHECK(item.inputs.size() == 1, where, ": '", item.name, "' must be one value, not a list");
    entries.push_back({item.name, item.inputs[0], where});
  }
  return entries;
}

Json toml_value(const std::string& value, const std::string&) { return value; }

Json toml_value(const std::string& value, const int64_t&) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || end != value.data() + value.size()) throw std::invalid_argument("an integer");
  return x;
}

Json toml_value(const std::string& value, const double&) {
  double x = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(x)) throw std::invalid_argument("a finite number");
  return x;
}

std::string read_settings_file_text(const std::string& path) {
  QKGRAD_CHECK(std::filesystem::is_regular_file(path), "--config ", path, ": no such file");
  return read_file(path, 1 << 20);
}

bool is_json_path(const std::string& path) { return path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0; }

std::string settings_file_text(const Json& settings, const std::string& header,
                               const std::map<std::string, std::string>& origin) {
  std::string text = "# " + header + "\n";
  for (const auto& item : settings.items()) {
    std::string line = cat(item.key(), " = ", item.value().dump());
    if (const auto it = origin.find(item.key()); it != origin.end()) {
      line.append(line.size() < 32 ? 32 - line.size() : 1, ' ');
      line += "# " + it->second;
    }
    text += line + "\n";
  }
  return text;
}

std::string presets_side_by_side(const std::vector<std::pair<std::string, Json>>& presets,
                                 const std::vector<std::string>& always, const std::string& footnote) {
  auto column = [](const std::string& value) { return cat(std::string(12 - std::min<std::size_t>(value.size(), 11), ' '), value); };
  std::string text = cat("presets (--preset; every flag above changes one setting):\n", std::string(20, ' '));
  for (const auto& [name, settings] : presets) text += column(name);
  text += "\n";
  const Json& first = presets.front().second;
  for (const auto& item : first.items()) {
    const std::string& key = item.key();
    if (key == "preset" || key == "data") continue;
    bool shown = std::find(always.begin(), always.end(), key) != always.end();
    for (const auto& [name, settings] : presets) shown = shown || settings.at(key) != first.at(key);
    if (!shown) continue;
    std::string row = cat("  ", key, std::string(18 - std::min<std::size_t>(key.size(), 17), ' '));
    for (const auto& [name, settings] : presets)
      row += column(settings.at(key).is_string() ? settings.at(key).get<std::string>() : settings.at(key).dump());
    text += row + "\n";
  }
  return text + footnote;
}

}  // namespace qkgrad
