// A language-model run's settings: the presets, options.json and the model derived from them.
// See lm/settings.h.
#include "lm/settings.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/settings_io.h"
#include "io/text.h"

namespace qkgrad::lm {

bool is_preset(const std::string& name) { return std::find(kPresets.begin(), kPresets.end(), name) != kPresets.end(); }

LmSettings preset_settings(const std::string& name) {
  LmSettings s;
  s.preset = name;
  if (name == "tiny") {  // a smoke test: seconds, not quality
    s.layers = 1;
    s.d_model = 32;
    s.heads = 2;
    s.ffn = 64;
    s.context = 32;
    s.batch_size = 8;
    s.warmup = 20;
    s.max_steps = 200;
    s.eval_every = 100;
    s.log_every = 20;
    s.eval_windows = 50;
  } else if (name == "demo") {
    // Sized by measurement: 5,000 steps (10.2 M bytes, 2.9 epochs of the English Bible) trained
    // in 8 min 0 s on 2 cores of the AMD EPYC (Zen 5) of 2026-12-06 (evening), to 1.62 test bits
    // per byte and text of English words and Bible phrases; the 14-minute budget ends it sooner
    // on a slower machine.
    s.layers = 4;
    s.d_model = 192;
    s.heads = 3;
    s.ffn = 768;
    s.context = 128;
    s.batch_size = 16;
    s.lr = 2e-3;
    s.warmup = 100;
    s.max_steps = 5000;
    s.eval_every = 1000;
    s.eval_windows = 400;
    s.max_minutes = 14;
  } else if (name == "small") {
    s.layers = 6;
    s.d_model = 384;
    s.heads = 6;
    s.ffn = 1536;
    s.context = 256;
    s.batch_size = 32;
    s.lr = 1e-3;
    s.warmup = 500;
    s.max_steps = 20000;
    s.eval_every = 1000;
  } else {
    fail(cat("unknown preset '", name, "' (choose ", join(kPresets, ", "), ")"));
  }
  return s;
}

std::string presets_table() {
  std::vector<std::pair<std::string, Json>> presets;
  for (const std::string& name : kPresets) presets.emplace_back(name, to_json(preset_settings(name)));
  return presets_side_by_side(presets, {"max_minutes"}, "  (max_minutes 0: no time limit)\n");
}

Json to_json(const LmSettings& s) {
  Json j = settings_to_json(s);
  std::error_code ec;
  std::string data = std::filesystem::absolute(s.data, ec).lexically_normal().string();
  while (data.size() > 1 && data.back() == '/') data.pop_back();
  j["data"] = s.data.empty() || ec ? s.data : data;
  return j;
}

LmSettings from_json(const Json& json, const std::string& source, LmSettings base) {
  settings_from_json(json, source, base);
  return base;
}

LmSettings load_run_settings(const std::string& options_path) {
  const Json json = parse_json(read_file(options_path, 1 << 20), options_path);
  const JsonFields fields(json, options_path);
  const std::string preset = fields.has("preset") ? fields.string("preset") : "small";
  QKGRAD_CHECK(is_preset(preset), options_path, ": unknown preset '", preset, "' (choose ", join(kPresets, ", "), ")");
  return from_json(json, options_path, preset_settings(preset));
}

Json read_config_file(const std::string& path) {
  return read_settings_file<LmSettings>(path, "the keys are those of options.json; see train --dump-config");
}

std::string to_config_text(const LmSettings& s, const std::map<std::string, std::string>& origin) {
  return settings_file_text(to_json(s), "qkgrad-lm train settings: train --config FILE reads them (the keys of options.json)",
                            origin);
}

bool fixed_on_resume(const std::string& key) {
  const std::optional<SettingInfo> info = find_setting<LmSettings>(key);
  return info && info->resume == Resume::fixed;
}

LanguageModelConfig model_config(const LmSettings& s) {
  LanguageModelConfig c;
  static_cast<LanguageModelHyperparameters&>(c) = s;  // every hyperparameter of the table
  c.vocab = kVocab;
  c.qknorm_length = static_cast<double>(std::max<int64_t>(s.context, 2));
  c.seed = static_cast<uint64_t>(s.seed);
  return c;
}

}  // namespace qkgrad::lm
