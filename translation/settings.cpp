// A run's settings: the presets, the one JSON mapping (options.json), and the model derived from
// them. See translation/settings.h.
#include "translation/settings.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"

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

// Every setting once, under its key in options.json, with its resume rule: to_json, from_json
// and fixed_on_resume all walk this list, so a new setting is one line here (and its member and
// flag).
template <typename Settings, typename Visit>
void for_each_setting(Settings& s, Visit&& visit) {
  visit("data", s.data_dir, Resume::fixed);
  visit("src", s.src, Resume::fixed);
  visit("tgt", s.tgt, Resume::fixed);
  visit("max_length", s.max_length, Resume::fixed);
  visit("preset", s.preset, Resume::fixed);
  visit("attention", s.attention, Resume::fixed);
  visit("norm", s.norm, Resume::fixed);
  visit("layers", s.layers, Resume::fixed);
  visit("d_model", s.d_model, Resume::fixed);
  visit("heads", s.heads, Resume::fixed);
  visit("ffn", s.ffn, Resume::fixed);
  visit("vocab_size", s.vocab_size, Resume::fixed);
  visit("dropout", s.dropout, Resume::may_change);
  visit("attention_dropout", s.attention_dropout, Resume::may_change);
  visit("ffn_dropout", s.ffn_dropout, Resume::may_change);
  visit("word_dropout", s.word_dropout, Resume::may_change);
  visit("batch_tokens", s.batch_tokens, Resume::fixed);
  visit("lr", s.lr, Resume::may_change);
  visit("warmup", s.warmup, Resume::may_change);
  visit("schedule", s.schedule, Resume::may_change);
  visit("label_smoothing", s.label_smoothing, Resume::may_change);
  visit("clip", s.clip, Resume::may_change);
  visit("seed", s.seed, Resume::fixed);
  visit("max_steps", s.max_steps, Resume::may_change);
  visit("max_minutes", s.max_minutes, Resume::may_change);
  visit("eval_every", s.eval_every, Resume::may_change);
  visit("eval_sentences", s.eval_sentences, Resume::may_change);
  visit("patience", s.patience, Resume::may_change);
  visit("beam", s.beam, Resume::may_change);
  visit("alpha", s.alpha, Resume::may_change);
  visit("bleu_tokenize", s.bleu_tokenize, Resume::may_change);
  visit("device", s.device, Resume::may_change);
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

Json to_json(const RunSettings& s) {
  Json j = Json::object();
  for_each_setting(s, [&](const char* key, const auto& value, Resume) { j[key] = value; });
  j["data"] = absolute_data_dir(s.data_dir);
  return j;
}

RunSettings from_json(const Json& json, const std::string& source, RunSettings base) {
  const JsonFields fields(json, source);
  for_each_setting(base, [&](const char* key, auto& value, Resume) {
    if (fields.has(key)) read(fields, key, value);
  });
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
  for_each_setting(any, [&](const char* name, const auto&, Resume rule) { fixed = fixed || (key == name && rule == Resume::fixed); });
  return fixed;
}

TransformerConfig model_config(const RunSettings& s, int64_t vocab, const std::string& vocabulary_id, double L) {
  TransformerConfig c;
  c.vocab = vocab;
  c.vocabulary_id = vocabulary_id;
  c.d_model = s.d_model;
  c.heads = s.heads;
  c.ffn = s.ffn;
  c.encoder_layers = c.decoder_layers = s.layers;
  c.attention = s.attention == "qknorm" ? AttentionMode::qknorm : AttentionMode::scaled_dot;
  c.norm = s.norm == "layer_norm" ? NormType::layer_norm : NormType::scale_norm;
  c.qknorm_length = std::max(L, 2.0);
  c.dropout = s.dropout;
  c.attention_dropout = s.attention_dropout;
  c.ffn_dropout = s.ffn_dropout;
  c.word_dropout = s.word_dropout;
  c.seed = static_cast<uint64_t>(s.seed);
  return c;
}

}  // namespace qkgrad::translation
