// The settings of a training run, in one struct: its data, its model's size, its recipe, its
// budgets and how it is evaluated. The presets are values of this struct; the command line of
// `qkgrad-translate train` sets its fields; RUNDIR/options.json is its JSON (to_json, from_json:
// one mapping, written by a new run and read back by --resume, eval and translate); the model's
// TransformerConfig is derived from it in one place (model_config).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/json.h"
#include "nn/transformer.h"

namespace qkgrad::translation {

struct RunSettings {
  // ---- the data ----
  std::string data_dir;                // DATA: train/dev/test.{SRC,TGT}
  std::string src = "es", tgt = "en";  // language suffixes
  int64_t max_length = 250;            // training pairs longer than this many subwords are dropped

  // ---- the model ----
  std::string preset = "small";        // the preset these settings started from (tiny, demo, small, paper)
  std::string attention = "qknorm";    // or scaled_dot
  std::string norm = "layer_norm";     // or scale_norm
  int64_t layers = 3, d_model = 256, heads = 4, ffn = 1024;  // layers: of the encoder and of the decoder
  int64_t vocab_size = 8000;           // joint SentencePiece pieces
  std::string qknorm_gain = "shared";  // QKNorm's g: one per attention module (the paper), or per_head
  std::string fixnorm = "on";          // FixNorm: unit-length tied embeddings (on, the paper's), or off
  std::string dtype = "f32";           // the parameters' and activations' type: f32, or f64 (slow; for checks)

  // ---- the recipe ----
  double dropout = 0.1, attention_dropout = 0.1, ffn_dropout = 0.1, word_dropout = 0.1;
  int64_t batch_tokens = 4096;         // padded tokens per batch (max of the source and target sides)
  int64_t accumulate = 1;              // each batch as this many micro-batches, gradients summed
  double lr = 1e-3;                    // peak learning rate
  int64_t warmup = 4000;               // linear warmup steps
  std::string schedule = "plateau";    // plateau (the paper's), cosine (to 0 at max_steps), inverse_sqrt
  double label_smoothing = 0.1;
  double clip = 1.0;                   // global gradient-norm clip
  int64_t seed = 1;                    // subwords, initialisation, dropout and data order

  // ---- budgets and evaluation ----
  int64_t max_steps = 100000;
  double max_minutes = 0;              // training minutes, resumes included (0: no time budget)
  int64_t eval_every = 1000;           // steps between dev evaluations
  int64_t log_every = 50;              // steps between log lines (and metrics.jsonl's train_loss)
  int64_t eval_sentences = 500;        // dev sentences translated for BLEU at each evaluation (0: all)
  int64_t patience = 10;               // stop after this many evaluations without a better dev BLEU
  int64_t beam = 4;                    // beam search for dev BLEU ...
  double alpha = 0.6;                  // ... and its length penalty
  std::string bleu_tokenize = "13a";   // or none (pre-tokenised data)
  std::string best_metric = "bleu";    // what picks checkpoints/best and counts patience: bleu, chrf or loss
  int64_t keep_last = 0;               // also keep the last K saves as checkpoints/step-N (0: none)
  int64_t save_every = 0;              // also save checkpoints/last every this many steps (0: at evaluations only)

  // ---- where and how it computes (not part of the model: may change on --resume) ----
  std::string device = "cpu";          // or cuda
  std::string precision = "f32";       // the linear layers' products: f32, or bf16 (mixed precision, ops/precision.h)
};

// The presets: tiny (smoke tests), demo (the README's 15-minute run), small, paper (Henry et
// al.'s gl→en model and recipe). preset_settings throws naming the choices for another name.
inline const std::vector<std::string> kPresets = {"tiny", "demo", "small", "paper"};
bool is_preset(const std::string& name);
RunSettings preset_settings(const std::string& name);

// The presets side by side, one row per setting a preset sets (train --help prints it).
std::string presets_table();

// options.json: every setting under its own key (data as an absolute path, so that eval from
// another directory finds it). from_json starts from `base` and takes every key the file has,
// so a file of an older qkgrad, which lacks newer keys, keeps base's values for them; a key of
// the wrong kind is an error naming `source` and the key.
Json to_json(const RunSettings& s);
RunSettings from_json(const Json& json, const std::string& source, RunSettings base = {});

// RUNDIR/options.json read back: from_json on the preset the file names (so the keys an older
// file lacks keep that preset's values). Errors name the file.
RunSettings load_run_settings(const std::string& options_path);

// `train --config FILE`: a settings file with the keys of options.json. TOML (`key = value`
// lines, `#` comments; read by CLI11's TOML reader), or, for a FILE ending in .json, an
// options.json (so `--config runs/old/options.json` repeats a run). The result is a JSON object
// of the keys the file gives, each of its setting's kind; an unknown key, a section, a list or a
// value of the wrong kind is an error naming FILE:LINE and the key. Apply it with from_json.
Json read_config_file(const std::string& path);

// The settings as a config file that read_config_file reads back to the same settings (`train
// --dump-config`). `origin` (key -> where its value came from: "preset demo", "--config
// exp.toml", "--lr", ...) adds a comment after each value it names.
std::string to_config_text(const RunSettings& s, const std::map<std::string, std::string>& origin = {});

// What a setting allows: numbers in [min, max], or strings among `choices` (empty: any).
struct Allowed {
  double min = 0, max = 0;
  std::vector<std::string> choices;
};
Allowed allowed_values(const std::string& key);  // of a key of options.json

// Throws naming `source` (a file, or "" for flags), the key and what it allows when a setting
// is out of its range or not one of its choices (from_json calls it: options.json and config
// files are checked like the flags).
void check_settings(const RunSettings& s, const std::string& source);

// The keys a resumed run must keep: they define the model, the data and their order. The others
// (the recipe, the budgets, evaluation, the device) may change on --resume.
bool fixed_on_resume(const std::string& key);

// The model of a run: its sizes and recipe from the settings, its vocabulary from the subwords,
// QKNorm's length L (the 97.5th percentile of training lengths) from the training data.
TransformerConfig model_config(const RunSettings& s, int64_t vocab, const std::string& vocabulary_id, double L);

}  // namespace qkgrad::translation
