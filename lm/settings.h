// The settings of a language-model training run (qkgrad-lm), in one struct: its data, its
// model's hyperparameters (nn/language_model.h), its recipe, budgets and evaluation, each setting
// written once in a table (core/setting.h). The presets are values of this struct; train's flags,
// RUNDIR/options.json, --config files and --dump-config are made from the tables by
// cli/setting_flags.h and io/settings_io.h; the model's LanguageModelConfig is derived from it
// in one place (model_config).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/setting.h"
#include "io/json.h"
#include "nn/language_model.h"

namespace qkgrad::lm {

inline constexpr double kMaxSteps = 1099511627776.0;  // 2^40: the largest step count, warmup or interval

// The model reads bytes: any UTF-8 text is a corpus, and the loss per token is the loss per byte.
inline constexpr int64_t kVocab = 256;

// X(type, name, default, resume rule, what it allows, help); the key in options.json and config
// files is the name, the flag --name with - for _.
#define QKGRAD_LM_DATA_SETTINGS(X)                                                                                     \
  X(std::string, data, "", Resume::fixed, any_text(),                                                                  \
    "directory with train.txt and valid.txt (UTF-8 text; `qkgrad-lm prepare` makes the default one; required for a " \
    "new run)")                                                                                                        \
  X(std::string, preset, "small", Resume::fixed, one_of(kPresets), "model size and recipe (the defaults below are its values)") \
  X(int64_t, context, 256, Resume::fixed, range(2, 65536), "bytes the model sees at once: the training windows' length") \
  X(int64_t, seed, 1, Resume::fixed, range(0, 4611686018427387904.0 /* 2^62 */), "seed for initialisation, dropout and data order")

#define QKGRAD_LM_RECIPE_SETTINGS(X)                                                                                   \
  X(int64_t, batch_size, 32, Resume::fixed, range(1, 1000000), "windows of --context bytes per batch")                 \
  X(int64_t, accumulate, 1, Resume::may_change, range(1, 1024),                                                        \
    "run each batch as K micro-batches with their gradients summed (the same update, a K-th of the activation memory)") \
  X(double, lr, 1e-3, Resume::may_change, range(1e-9, 10), "peak learning rate")                                       \
  X(int64_t, warmup, 200, Resume::may_change, range(0, kMaxSteps), "linear warmup steps")                              \
  X(std::string, schedule, "cosine", Resume::may_change, one_of({"cosine", "inverse_sqrt", "plateau"}),                \
    "learning-rate schedule after warmup: cosine = decay to 0 at --max-steps; plateau = flat, x0.8 when the valid "   \
    "loss stalls 3 times")                                                                                             \
  X(double, weight_decay, 0.1, Resume::may_change, range(0, 10),                                                       \
    "AdamW's decoupled weight decay (p -= lr * wd * p) on the weight matrices and embeddings; none on norms' gains, " \
    "QKNorm's g and biases")                                                                                          \
  X(double, beta2, 0.95, Resume::may_change, range(0, 0.999999), "Adam's second-moment decay")                        \
  X(double, z_loss, 0.0, Resume::may_change, range(0, 1),                                                              \
    "lambda of the z-loss lambda * log^2 Z of each softmax normaliser (PaLM; Wortsman et al. use 1e-4)")               \
  X(double, clip, 1.0, Resume::may_change, range(1e-6, 1e6), "global gradient-norm clip")                              \
  X(int64_t, max_steps, 5000, Resume::may_change, range(1, kMaxSteps), "step budget")                                  \
  X(double, max_minutes, 0, Resume::may_change, range(0, 1e7),                                                         \
    "time budget: training minutes of the run, resumes included (0: none)")                                           \
  X(int64_t, eval_every, 500, Resume::may_change, range(1, kMaxSteps), "steps between validation evaluations")         \
  X(int64_t, log_every, 50, Resume::may_change, range(1, kMaxSteps),                                                   \
    "steps between log lines (timestamped; on a terminal a live bar runs between them)")                              \
  X(int64_t, eval_windows, 0, Resume::may_change, range(0, kMaxSteps),                                                 \
    "validation windows of --context bytes at each evaluation, spread over valid.txt (0: all of it)")                 \
  X(int64_t, patience, 10, Resume::may_change, range(1, 1000000),                                                      \
    "stop after this many evaluations without a better validation loss")                                               \
  X(double, stop_lr, 0, Resume::may_change, range(0, 10),                                                              \
    "stop at an evaluation after the warmup once the learning rate is below this (the paper's code: 5e-5, with the " \
    "plateau schedule; 0: never)")                                                                                     \
  X(int64_t, keep_last, 0, Resume::may_change, range(0, 1000000), "also keep the last K saves as RUNDIR/checkpoints/step-N") \
  X(int64_t, save_every, 0, Resume::may_change, range(0, kMaxSteps),                                                   \
    "also save RUNDIR/checkpoints/last every N steps (0: at evaluations only)")                                      \
  X(std::string, device, "cpu", Resume::may_change, one_of({"cpu", "cuda"}),                                           \
    "where the model trains (cuda: needs a CUDA build and a GPU)")                                                     \
  X(std::string, precision, "f32", Resume::may_change, one_of({"f32", "bf16"}),                                        \
    "f32, or bf16: the linear layers multiply bf16 operands with f32 accumulation (master weights stay f32; needs a " \
    "CPU with AVX512_BF16 or AMX)")

// tiny (smoke tests), demo (the README's run: minutes on 2 cores), small.
inline const std::vector<std::string> kPresets = {"tiny", "demo", "small"};

struct LmSettings : LanguageModelHyperparameters {
  QKGRAD_LM_DATA_SETTINGS(QKGRAD_SETTING_MEMBER)
  QKGRAD_LM_RECIPE_SETTINGS(QKGRAD_SETTING_MEMBER)

  // visit(const SettingInfo&, member&) for every setting of a run, the model's included.
  template <typename Self, typename Visit>
  static void for_each(Self& self, Visit&& visit) {
    QKGRAD_LM_DATA_SETTINGS(QKGRAD_SETTING_VISIT)
    LanguageModelHyperparameters::for_each(self, visit);
    QKGRAD_LM_RECIPE_SETTINGS(QKGRAD_SETTING_VISIT)
  }
};

bool is_preset(const std::string& name);
LmSettings preset_settings(const std::string& name);  // throws naming the choices for another name
std::string presets_table();                         // the presets side by side (train --help)

// options.json (data as an absolute path), checked; from_json starts from `base` and takes
// every key the file has. Errors name `source` and the key.
Json to_json(const LmSettings& s);
LmSettings from_json(const Json& json, const std::string& source, LmSettings base = {});
LmSettings load_run_settings(const std::string& options_path);  // from the preset the file names
Json read_config_file(const std::string& path);                 // train --config FILE (TOML or JSON)
std::string to_config_text(const LmSettings& s, const std::map<std::string, std::string>& origin = {});
bool fixed_on_resume(const std::string& key);

// The model of a run: the hyperparameters, bytes, QKNorm's L = the context.
LanguageModelConfig model_config(const LmSettings& s);

}  // namespace qkgrad::lm
