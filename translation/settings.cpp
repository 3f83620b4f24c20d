// A run's settings: the presets, the one JSON mapping (options.json), and the model derived from
// them. See translation/settings.h.
#include "translation/settings.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/text.h"

namespace qkgrad::translation {

bool is_preset(const std::string& name) { return std::find(kPresets.begin(), kPresets.end(), name) != kPresets.end(); }

RunSettings preset_settings(const std::string& name) {
  RunSettings s;
  s.preset = name;
  if (name == "demo") {
    // Sized by measurement (README, "Numbers"): a small model, many small batches, and a cosine
    // decay that reaches 0 at the last step. 3,000 steps train in 12 min 40 s on 2 cores of the
    // Intel Xeon of 2026-12-01 (test BLEU 22.0; 1,800 steps: 7 min 39 s, 17.3); on a slower
    // machine the 17-minute time budget ends it sooner.
    s.layers = 2;
    s.d_model = 256;
    s.heads = 4;
    s.ffn = 1024;
    s.dropout = s.attention_dropout = s.ffn_dropout = s.word_dropout = 0.05;
    s.vocab_size = 4000;
    s.batch_tokens = 2000;
    s.lr = 1.5e-3;
    s.warmup = 400;
    s.max_steps = 3000;
    s.eval_every = 1000;
    s.eval_sentences = 150;
    s.max_minutes = 17;
    s.schedule = "cosine";
  } else if (name == "small") {
    s.layers = 3;
    s.d_model = 256;
    s.heads = 4;
    s.ffn = 1024;
    s.vocab_size = 8000;
    s.batch_tokens = 4096;
    s.lr = 1e-3;
    s.warmup = 2000;
    s.eval_every = 1000;
  } else if (name == "paper") {  // Henry et al.'s gl→en setting: 4+4 layers, 4 heads, dropout 0.4
    s.layers = 4;
    s.d_model = 512;
    s.heads = 4;
    s.ffn = 2048;
    s.dropout = s.attention_dropout = s.ffn_dropout = 0.4;
    s.vocab_size = 8000;
    s.batch_tokens = 4096;
    s.lr = 1e-3;
    s.warmup = 8000;
    s.eval_every = 1000;
  } else if (name == "tiny") {  // a smoke test: seconds, not quality
    s.layers = 1;
    s.d_model = 32;
    s.heads = 2;
    s.ffn = 64;
    s.dropout = s.attention_dropout = s.ffn_dropout = s.word_dropout = 0.1;
    s.vocab_size = 1000;
    s.batch_tokens = 1000;
    s.warmup = 100;
    s.max_steps = 1000;
    s.eval_every = 200;
    s.eval_sentences = 100;
  } else {
    fail(cat("unknown preset '", name, "' (choose tiny, demo, small or paper)"));
  }
  return s;
}

namespace {

// Whether a resumed run must keep a setting: the data, the model and the batch order are fixed;
// the recipe, the budgets, evaluation and the device may change.
enum class Resume { fixed, may_change };

constexpr double kSteps = 1099511627776.0;  // 2^40: the largest step count, warmup or interval
const std::vector<std::string> kAnyText;

// Every setting once, under its key in options.json, with its resume rule and what it allows
// (a range, or the choices of a string; kAnyText: any string): to_json, from_json,
// check_settings, fixed_on_resume and train's flags all walk this list, so a new setting is one
// line here (and its member and flag).
template <typename Settings, typename Visit>
void for_each_setting(Settings& s, Visit&& visit) {
  visit("data", s.data_dir, Resume::fixed, Allowed{0, 0, kAnyText});
  visit("src", s.src, Resume::fixed, Allowed{0, 0, kAnyText});
  visit("tgt", s.tgt, Resume::fixed, Allowed{0, 0, kAnyText});
  visit("max_length", s.max_length, Resume::fixed, Allowed{1, 100000, {}});
  visit("preset", s.preset, Resume::fixed, Allowed{0, 0, kPresets});
  visit("attention", s.attention, Resume::fixed, Allowed{0, 0, attention_mode_names()});
  visit("norm", s.norm, Resume::fixed, Allowed{0, 0, {"layer_norm", "scale_norm"}});
  visit("layers", s.layers, Resume::fixed, Allowed{1, 64, {}});
  visit("d_model", s.d_model, Resume::fixed, Allowed{2, 16384, {}});
  visit("heads", s.heads, Resume::fixed, Allowed{1, 256, {}});
  visit("ffn", s.ffn, Resume::fixed, Allowed{1, 65536, {}});
  visit("vocab_size", s.vocab_size, Resume::fixed, Allowed{8, 1000000, {}});
  visit("qknorm_gain", s.qknorm_gain, Resume::fixed, Allowed{0, 0, {"shared", "per_head"}});
  visit("fixnorm", s.fixnorm, Resume::fixed, Allowed{0, 0, {"on", "off"}});
  visit("dtype", s.dtype, Resume::fixed, Allowed{0, 0, {"f32", "f64"}});
  visit("dropout", s.dropout, Resume::may_change, Allowed{0, 0.99, {}});
  visit("attention_dropout", s.attention_dropout, Resume::may_change, Allowed{0, 0.99, {}});
  visit("ffn_dropout", s.ffn_dropout, Resume::may_change, Allowed{0, 0.99, {}});
  visit("word_dropout", s.word_dropout, Resume::may_change, Allowed{0, 0.99, {}});
  visit("batch_tokens", s.batch_tokens, Resume::fixed, Allowed{16, 10000000, {}});
  visit("accumulate", s.accumulate, Resume::may_change, Allowed{1, 1024, {}});
  visit("lr", s.lr, Resume::may_change, Allowed{1e-9, 10, {}});
  visit("warmup", s.warmup, Resume::may_change, Allowed{0, kSteps, {}});
  visit("schedule", s.schedule, Resume::may_change, Allowed{0, 0, {"plateau", "cosine", "inverse_sqrt"}});
  visit("label_smoothing", s.label_smoothing, Resume::may_change, Allowed{0, 1, {}});
  visit("clip", s.clip, Resume::may_change, Allowed{1e-6, 1e6, {}});
  visit("seed", s.seed, Resume::fixed, Allowed{0, 4611686018427387904.0, {}});  // 2^62
  visit("max_steps", s.max_steps, Resume::may_change, Allowed{1, kSteps, {}});
  visit("max_minutes", s.max_minutes, Resume::may_change, Allowed{0, 1e7, {}});
  visit("eval_every", s.eval_every, Resume::may_change, Allowed{1, kSteps, {}});
  visit("log_every", s.log_every, Resume::may_change, Allowed{1, kSteps, {}});
  visit("eval_sentences", s.eval_sentences, Resume::may_change, Allowed{0, kSteps, {}});
  visit("patience", s.patience, Resume::may_change, Allowed{1, 1000000, {}});
  visit("beam", s.beam, Resume::may_change, Allowed{1, 64, {}});
  visit("alpha", s.alpha, Resume::may_change, Allowed{0, 10, {}});
  visit("bleu_tokenize", s.bleu_tokenize, Resume::may_change, Allowed{0, 0, {"13a", "none"}});
  visit("best_metric", s.best_metric, Resume::fixed, Allowed{0, 0, {"bleu", "chrf", "loss"}});
  visit("keep_last", s.keep_last, Resume::may_change, Allowed{0, 1000000, {}});
  visit("save_every", s.save_every, Resume::may_change, Allowed{0, kSteps, {}});
  visit("device", s.device, Resume::may_change, Allowed{0, 0, {"cpu", "cuda"}});
  visit("precision", s.precision, Resume::may_change, Allowed{0, 0, {"f32", "bf16"}});
}

// Whether a value is one the setting allows; otherwise what it must be.
std::string disallowed(const std::string& value, const Allowed& allowed) {
  if (allowed.choices.empty() || std::find(allowed.choices.begin(), allowed.choices.end(), value) != allowed.choices.end()) {
    return "";
  }
  return cat("one of ", join(allowed.choices, ", "));
}
std::string number_text(double x) {
  if (x == std::floor(x) && std::fabs(x) < 1e18) return std::to_string(static_cast<int64_t>(x));
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}
template <typename Number>
std::string disallowed(Number value, const Allowed& allowed) {
  const double x = static_cast<double>(value);
  if (x >= allowed.min && x <= allowed.max) return "";
  return cat("between ", number_text(allowed.min), " and ", number_text(allowed.max));
}

void read(const JsonFields& f, const char* key, std::string& value) { value = f.string(key); }
void read(const JsonFields& f, const char* key, int64_t& value) { value = f.integer(key); }
void read(const JsonFields& f, const char* key, double& value) { value = f.number(key); }

// DATA as an absolute path without a trailing slash.
std::string absolute_data_dir(const std::string& dir) {
  std::error_code ec;
  std::string path = std::filesystem::absolute(dir, ec).lexically_normal().string();
  if (ec) path = dir;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path;
}

}  // namespace

std::string presets_table() {
  std::vector<Json> presets;
  for (const std::string& name : kPresets) presets.push_back(to_json(preset_settings(name)));
  std::string text = cat("presets (--preset; every flag above changes one setting):\n", std::string(20, ' '));
  for (const std::string& name : kPresets) text += cat(std::string(12 - std::min<std::size_t>(name.size(), 11), ' '), name);
  text += "\n";
  for (const auto& item : presets.front().items()) {
    const std::string& key = item.key();
    if (key == "preset" || key == "data") continue;
    bool differs = false;
    for (const Json& p : presets) differs = differs || p.at(key) != presets.front().at(key);
    if (!differs && key != "max_minutes") continue;  // the same in every preset: its flag's default says it
    std::string row = cat("  ", key, std::string(18 - std::min<std::size_t>(key.size(), 17), ' '));
    for (const Json& p : presets) {
      const std::string value = p.at(key).is_string() ? p.at(key).get<std::string>() : p.at(key).dump();
      row += cat(std::string(12 - std::min<std::size_t>(value.size(), 11), ' '), value);
    }
    text += row + "\n";
  }
  return text + "  (max_minutes 0: no time limit; small and paper train until patience or max_steps ends them)\n";
}

Json to_json(const RunSettings& s) {
  Json j = Json::object();
  for_each_setting(s, [&](const char* key, const auto& value, Resume, const Allowed&) { j[key] = value; });
  j["data"] = absolute_data_dir(s.data_dir);
  return j;
}

RunSettings from_json(const Json& json, const std::string& source, RunSettings base) {
  const JsonFields fields(json, source);
  for_each_setting(base, [&](const char* key, auto& value, Resume, const Allowed&) {
    if (fields.has(key)) read(fields, key, value);
  });
  check_settings(base, source);
  return base;
}

RunSettings load_run_settings(const std::string& options_path) {
  const Json json = parse_json(read_file(options_path, 1 << 20), options_path);
  const JsonFields fields(json, options_path);
  const std::string preset = fields.has("preset") ? fields.string("preset") : "small";
  QKGRAD_CHECK(is_preset(preset), options_path, ": unknown preset '", preset, "' (choose tiny, demo, small or paper)");
  return from_json(json, options_path, preset_settings(preset));
}

bool fixed_on_resume(const std::string& key) {
  bool fixed = false;
  const RunSettings any;
  for_each_setting(any, [&](const char* name, const auto&, Resume rule, const Allowed&) {
    fixed = fixed || (key == name && rule == Resume::fixed);
  });
  return fixed;
}

Allowed allowed_values(const std::string& key) {
  std::optional<Allowed> found;
  const RunSettings any;
  for_each_setting(any, [&](const char* name, const auto&, Resume, const Allowed& allowed) {
    if (key == name) found = allowed;
  });
  if (!found) throw std::invalid_argument(cat("allowed_values: no setting '", key, "'"));
  return *found;
}

void check_settings(const RunSettings& s, const std::string& source) {
  for_each_setting(s, [&](const char* key, const auto& value, Resume, const Allowed& allowed) {
    const std::string must = disallowed(value, allowed);
    QKGRAD_CHECK(must.empty(), source.empty() ? "" : source + ": ", "'", key, "' must be ", must, ", got ",
                 Json(value).dump());
  });
  QKGRAD_CHECK(!s.src.empty() && !s.tgt.empty() && s.src != s.tgt, source.empty() ? "" : source + ": ",
               "'src' and 'tgt' must be two different language suffixes, got '", s.src, "' and '", s.tgt, "'");
}

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

// A TOML value (as CLI11 gives it: a string without its quotes) as the JSON of a setting's kind.
Json typed_value(const std::string& value, const std::string&) { return value; }
Json typed_value(const std::string& value, const int64_t&) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || end != value.data() + value.size()) throw std::invalid_argument("an integer");
  return x;
}
Json typed_value(const std::string& value, const double&) {
  double x = 0;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), x);
  if (ec != std::errc() || end != value.data() + value.size() || !std::isfinite(x)) throw std::invalid_argument("a finite number");
  return x;
}

Json read_toml_config(const std::string& path, const std::string& text) {
  std::istringstream in(text);
  std::vector<CLI::ConfigItem> items;
  try {
    items = CLI::ConfigTOML().from_config(in);
  } catch (const std::exception& e) {
    fail(cat(path, ": not a TOML settings file: ", e.what()));
  }
  Json out = Json::object();
  const RunSettings types;
  for (const CLI::ConfigItem& item : items) {
    if (item.name == "++" || item.name == "--") continue;  // CLI11's marks around a [section]
    const int64_t line = line_of_key(text, item.name);
    const std::string where = line > 0 ? cat(path, ":", line) : path;
    QKGRAD_CHECK(item.parents.empty(), where, ": '", item.name, "' is in the section [", CLI::detail::join(item.parents, "."),
                 "]; the settings are top-level keys (no sections)");
    bool known = false;
    for_each_setting(types, [&](const char* key, const auto& kind, Resume, const Allowed&) {
      if (item.name != key) return;
      known = true;
      QKGRAD_CHECK(item.inputs.size() == 1, where, ": '", key, "' must be one value, not a list");
      try {
        out[key] = typed_value(item.inputs[0], kind);
      } catch (const std::invalid_argument& e) {
        fail(cat(where, ": '", key, "' must be ", e.what(), ", got '", item.inputs[0], "'"));
      }
    });
    QKGRAD_CHECK(known, where, ": unknown setting '", item.name, "' (the keys are those of options.json; see ",
                 "train --dump-config)");
  }
  return out;
}

}  // namespace

Json read_config_file(const std::string& path) {
  QKGRAD_CHECK(std::filesystem::is_regular_file(path), "--config ", path, ": no such file");
  const std::string text = read_file(path, 1 << 20);
  if (path.size() < 5 || path.compare(path.size() - 5, 5, ".json") != 0) return read_toml_config(path, text);
  const Json json = parse_json(text, path);
  QKGRAD_CHECK(json.is_object(), path, ": must be a JSON object of settings");
  const RunSettings types;
  for (const auto& item : json.items()) {
    bool known = false;
    for_each_setting(types, [&](const char* key, const auto&, Resume, const Allowed&) { known = known || item.key() == key; });
    QKGRAD_CHECK(known, path, ": unknown setting '", item.key(), "' (the keys are those of options.json)");
  }
  from_json(json, path);  // the kinds, checked here with errors naming the key
  return json;
}

std::string to_config_text(const RunSettings& s, const std::map<std::string, std::string>& origin) {
  std::string text = "# qkgrad-translate train settings: train --config FILE reads them (the keys of options.json)\n";
  const Json json = to_json(s);
  for (const auto& item : json.items()) {
    std::string line = cat(item.key(), " = ", item.value().dump());
    if (const auto it = origin.find(item.key()); it != origin.end()) {
      line.append(line.size() < 32 ? 32 - line.size() : 1, ' ');
      line += "# " + it->second;
    }
    text += line + "\n";
  }
  return text;
}

TransformerConfig model_config(const RunSettings& s, int64_t vocab, const std::string& vocabulary_id, double L) {
  TransformerConfig c;
  c.vocab = vocab;
  c.vocabulary_id = vocabulary_id;
  c.d_model = s.d_model;
  c.heads = s.heads;
  c.ffn = s.ffn;
  c.encoder_layers = c.decoder_layers = s.layers;
  c.attention = attention_mode_from_name(s.attention);
  c.norm = s.norm == "layer_norm" ? NormType::layer_norm : NormType::scale_norm;
  c.qknorm_length = std::max(L, 2.0);
  c.per_head_g = s.qknorm_gain == "per_head";
  c.fixnorm = s.fixnorm == "on";
  c.dtype = s.dtype == "f64" ? DType::f64 : DType::f32;
  c.dropout = s.dropout;
  c.attention_dropout = s.attention_dropout;
  c.ffn_dropout = s.ffn_dropout;
  c.word_dropout = s.word_dropout;
  c.seed = static_cast<uint64_t>(s.seed);
  return c;
}

}  // namespace qkgrad::translation
