// A language model's checkpoints, and loading a trained one. See lm/trained_model.h.
#include "lm/trained_model.h"

#include "core/error.h"
#include "io/setting_json.h"
#include "io/settings_io.h"
#include "io/text.h"
#include "training/run_dir.h"

namespace qkgrad::lm {

namespace {
constexpr const char* kKind = "language_model";
}  // namespace

Json config_to_json(const LanguageModelConfig& c) {
  Json j = settings_to_json(static_cast<const LanguageModelHyperparameters&>(c));
  j["kind"] = kKind;
  j["vocab"] = c.vocab;
  j["qknorm_length"] = c.qknorm_length;
  j["seed"] = c.seed;
  return j;
}

LanguageModelConfig config_from_json(const Json& json, const std::string& source) {
  const JsonFields fields(json, source);
  QKGRAD_CHECK(fields.has("kind") && fields.string("kind") == kKind, source, ": not a language model's checkpoint (its ",
               "model's \"kind\" is not \"", kKind, "\"; a qkgrad-translate checkpoint is read by qkgrad-translate)");
  LanguageModelConfig c;
  settings_from_json(json, source, static_cast<LanguageModelHyperparameters&>(c));
  c.vocab = fields.integer("vocab");
  c.qknorm_length = fields.number("qknorm_length");
  c.seed = static_cast<uint64_t>(fields.integer("seed"));
  try {
    c.validate();
  } catch (const Error& e) {
    fail(cat(source, ": ", e.what()));
  }
  return c;
}

void save_checkpoint(const std::string& dir, const LanguageModel& model, const TrainerState* trainer) {
  qkgrad::save_checkpoint(dir, config_to_json(model.config()), model.named_parameters(), trainer);
}

void load_weights(const std::string& dir, LanguageModel& model) {
  const std::string source = dir + "/config.json";
  load_model_weights(dir, model.named_parameters(), [&](const Json& saved_json) {
    const Json saved = config_to_json(config_from_json(saved_json, source)), mine = config_to_json(model.config());
    std::vector<std::string> differences;
    LanguageModelHyperparameters::for_each(model.config(), [&](const SettingInfo& info, const auto&) {
      const std::string key = info.key;  // the architecture: what a resumed run keeps, but the dtype
      if (info.resume == Resume::fixed && key != "dtype" && saved.at(key) != mine.at(key)) {
        differences.push_back(cat(key, " ", saved.at(key).dump(), " vs ", mine.at(key).dump()));
      }
    });
    if (saved.at("vocab") != mine.at("vocab")) differences.push_back(cat("vocab ", saved.at("vocab").dump(), " vs ", mine.at("vocab").dump()));
    QKGRAD_CHECK(differences.empty(), source, ": the checkpoint does not fit this model: ", join(differences, "; "),
                 " (the checkpoint's value first)");
  });
}

LoadedModel load_trained_model(const std::string& run_dir, Device device, const std::string& checkpoint) {
  using training::RunDir;
  const RunDir run{run_dir};
  training::check_is_run_directory(run_dir);
  LoadedModel loaded;
  loaded.settings = load_run_settings(run.options());
  loaded.checkpoint = training::checkpoint_path(run, checkpoint);
  if (checkpoint.empty()) {
    QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), run_dir, " has no checkpoint (neither ", run.best(), " nor ",
                 run.last(), "); train first");
  } else {
    QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), "--checkpoint ", checkpoint, ": ", loaded.checkpoint,
                 " is not a checkpoint (choose best, last, or a checkpoint directory such as ", run.checkpoints(), "/step-N)");
  }
  const std::string remedy = loaded.checkpoint == run.best() && checkpoint_exists(run.last())
                                 ? cat("; if ", run.last(), " is intact, move ", run.best(), " away to use it; otherwise train again")
                                 : cat("; train again (or, if training is still running, wait for its next checkpoint)");
  try {
    const LanguageModelConfig config = config_from_json(load_checkpoint_model_json(loaded.checkpoint), loaded.checkpoint + "/config.json");
    loaded.model = std::make_unique<LanguageModel>(config, device);
    load_weights(loaded.checkpoint, *loaded.model);
  } catch (const Error& e) {
    fail(cat("cannot load checkpoint ", loaded.checkpoint, ": ", e.what(), remedy));
  }
  loaded.model->eval();
  return loaded;
}

}  // namespace qkgrad::lm
