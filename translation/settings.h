// The settings of a training run, in one struct: its data, its model's hyperparameters, its
// recipe, its budgets and how it is evaluated, each setting written once in a table. The
// presets are values of this struct; the command line of `qkgrad-translate train` sets its
// fields (a flag a setting, made from the tables); RUNDIR/options.json is its JSON (to_json,
// from_json: one mapping, written by a new run and read back by --resume, eval and translate);
// the model's TransformerConfig is derived from it in one place (model_config).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/setting.h"
#include "io/json.h"
#include "nn/transformer.h"

namespace qkgrad::translation {

inline constexpr double kMaxSteps = 1099511627776.0;  // 2^40: the largest step count, warmup or interval

// The settings of a run beyond the model's hyperparameters (nn/transformer.h), each written once
// (core/setting.h): X(type, name, default, resume rule, what it allows, help). Its key in
// options.json and config files is its name; its flag is --name with - for _. In two parts
// around the model's table: the data and the model, then the recipe, budgets and evaluation.
#define QKGRAD_TRANSLATION_DATA_AND_MODEL_SETTINGS(X)                                                                  \
  X(std::string, data, "", Resume::fixed, any_text(), "directory with train/dev/test.{SRC,TGT} (required for a new run)") \
  X(std::string, src, "es", Resume::fixed, any_text(), "source language suffix (default: inferred from DATA/train.*)")  \
  X(std::string, tgt, "en", Resume::fixed, any_text(), "target language suffix (default: inferred from DATA/train.*)")  \
  X(int64_t, max_length, 250, Resume::fixed, range(1, 100000), "drop training pairs longer than this many subwords")   \
  X(std::string, preset, "small", Resume::fixed, one_of(kPresets), "model size and recipe (the defaults below are its values)") \
  X(int64_t, layers, 3, Resume::fixed, range(1, 64), "encoder and decoder layers")                                    \
  X(int64_t, vocab_size, 8000, Resume::fixed, range(8, 1000000), "subword vocabulary size (joint SentencePiece pieces)") \
  X(std::string, subword_model, "unigram", Resume::fixed, one_of({"unigram", "bpe"}),                                 \
    "SentencePiece's subword model: unigram (Kudo 2018) or bpe (byte-pair merges, the algorithm of subword-nmt and "  \
    "fastBPE)")                                                                                                        \
  X(std::string, qknorm_gain, "shared", Resume::fixed, one_of({"shared", "per_head"}),                                 \
    "QKNorm's learned g: one per attention module (the paper) or one per head (rms_qknorm, layer_qknorm: the norms' " \
    "gains [d] shared by the heads, or [H, d])")                                                                       \
  X(std::string, fixnorm, "on", Resume::fixed, one_of({"on", "off"}),                                                 \
    "FixNorm: the tied embeddings at unit length (the paper) or not")                                                  \
  X(int64_t, seed, 1, Resume::fixed, range(0, 4611686018427387904.0 /* 2^62 */),                                     \
    "seed for subwords, initialisation, dropout and data order")

#define QKGRAD_TRANSLATION_RECIPE_SETTINGS(X)                                                                          \
  X(int64_t, batch_tokens, 4096, Resume::fixed, range(16, 10000000),                                                   \
    "padded tokens per batch (the larger of the source and target sides)")                                            \
  X(std::string, batch_sort, "target", Resume::fixed, one_of({"target", "longer"}),                                   \
    "how pairs are sorted into batches: target = by target length, then source (Marian's default); longer = by the " \
    "longer side in bins of 4 subwords, then source (as fairseq's --num-batch-buckets): less padding where the "      \
    "sides' lengths differ")                                                                                           \
  X(int64_t, accumulate, 1, Resume::may_change, range(1, 1024),                                                        \
    "run each batch as K micro-batches with their gradients summed (the same update, a K-th of the activation memory)") \
  X(double, lr, 1e-3, Resume::may_change, range(1e-9, 10), "peak learning rate")                                       \
  X(int64_t, warmup, 4000, Resume::may_change, range(0, kMaxSteps), "linear warmup steps")                             \
  X(std::string, schedule, "plateau", Resume::may_change, one_of({"plateau", "decline", "cosine", "inverse_sqrt"}),   \
    "learning-rate schedule after warmup: plateau = flat, x0.8 when the dev --best-metric stalls 3 times (the paper: " \
    "BLEU); decline = flat, x0.8 when an evaluation is below each of the 3 before it (the paper's code); cosine = "    \
    "decay to 0 at --max-steps")                                                                                       \
  X(double, label_smoothing, 0.1, Resume::may_change, range(0, 1), "label smoothing epsilon")                          \
  X(double, clip, 1.0, Resume::may_change, range(1e-6, 1e6), "global gradient-norm clip")                              \
  X(int64_t, max_steps, 100000, Resume::may_change, range(1, kMaxSteps), "step budget")                                \
  X(double, max_minutes, 0, Resume::may_change, range(0, 1e7),                                                         \
    "time budget: training minutes of the run, resumes included (0: none)")                                           \
  X(int64_t, eval_every, 1000, Resume::may_change, range(1, kMaxSteps), "steps between dev evaluations")               \
  X(int64_t, log_every, 50, Resume::may_change, range(1, kMaxSteps),                                                   \
    "steps between log lines (timestamped; on a terminal a live bar runs between them)")                              \
  X(int64_t, eval_sentences, 500, Resume::may_change, range(0, kMaxSteps),                                             \
    "dev sentences translated at each evaluation (0: all)")                                                           \
  X(int64_t, patience, 10, Resume::may_change, range(1, 1000000),                                                      \
    "stop after this many evaluations without a better dev --best-metric")                                           \
  X(double, stop_lr, 0, Resume::may_change, range(0, 10),                                                              \
    "stop at an evaluation after the warmup once the learning rate is below this (the paper's code: 5e-5, with the " \
    "plateau schedule; 0: never)")                                                                                     \
  X(int64_t, beam, 4, Resume::may_change, range(1, 64), "beam size for dev BLEU")                                      \
  X(double, alpha, 0.6, Resume::may_change, range(0, 10), "length penalty for dev BLEU")                               \
  X(std::string, bleu_tokenize, "13a", Resume::may_change, one_of({"13a", "none"}),                                    \
    "BLEU tokenisation (none for pre-tokenised data)")                                                                 \
  X(std::string, best_metric, "bleu", Resume::fixed, one_of({"bleu", "chrf", "loss"}),                                 \
    "the dev value that picks checkpoints/best, counts --patience and drives the plateau schedule")                  \
  X(int64_t, keep_last, 0, Resume::may_change, range(0, 1000000),                                                      \
    "also keep the last K saves as RUNDIR/checkpoints/step-N (for `average`; 0: none)")                              \
  X(int64_t, save_every, 0, Resume::may_change, range(0, kMaxSteps),                                                   \
    "also save RUNDIR/checkpoints/last every N steps (0: at evaluations only)")                                      \
  X(std::string, device, "cpu", Resume::may_change, one_of({"cpu", "cuda"}),                                           \
    "where the model trains (cuda: needs a CUDA build and a GPU)")                                                     \
  X(std::string, precision, "f32", Resume::may_change, one_of({"f32", "bf16"}),                                        \
    "f32, or bf16: the linear layers multiply bf16 operands with f32 accumulation (mixed precision; master weights, " \
    "gradients and Adam stay f32; needs a CPU with AVX512_BF16 or AMX)")

// The presets: tiny (smoke tests), demo (the README's 15-minute run), small, paper (Henry et
// al.'s gl→en model and recipe).
inline const std::vector<std::string> kPresets = {"tiny", "demo", "small", "paper"};

// A run's settings: the model's hyperparameters (its base) and the run's own.
struct RunSettings : TransformerHyperparameters {
  QKGRAD_TRANSLATION_DATA_AND_MODEL_SETTINGS(QKGRAD_SETTING_MEMBER)
  QKGRAD_TRANSLATION_RECIPE_SETTINGS(QKGRAD_SETTING_MEMBER)

  // visit(const SettingInfo&, member&) for every setting of a run, the model's hyperparameters
  // included: options.json, config files, the checks, the resume rules (io/settings_io.h) and
  // train's flags all walk this.
  template <typename Self, typename Visit>
  static void for_each(Self& self, Visit&& visit) {
    QKGRAD_TRANSLATION_DATA_AND_MODEL_SETTINGS(QKGRAD_SETTING_VISIT)
    TransformerHyperparameters::for_each(self, visit);
    QKGRAD_TRANSLATION_RECIPE_SETTINGS(QKGRAD_SETTING_VISIT)
  }
};

// preset_settings throws naming the choices for another name.
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

// What the setting of a key of options.json allows (its table's entry).
Allowed allowed_values(const std::string& key);

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
