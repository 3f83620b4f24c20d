// A language model's checkpoints and a trained model loaded back from its run directory.
//
//   DIR/config.json's "model": {"kind": "language_model", every hyperparameter of
//   QKGRAD_LANGUAGE_MODEL_HYPERPARAMETERS, "vocab", "qknorm_length", "seed"}
//
// (io/checkpoint.h writes and reads the files; the weights by their names, e.g.
// "blocks.0.attn.q_proj.weight".)
#pragma once

#include <memory>
#include <string>

#include "io/checkpoint.h"
#include "lm/settings.h"
#include "nn/language_model.h"

namespace qkgrad::lm {

Json config_to_json(const LanguageModelConfig& c);
// Every key checked (kind, range, choices), errors naming `source` and the key.
LanguageModelConfig config_from_json(const Json& json, const std::string& source);

void save_checkpoint(const std::string& dir, const LanguageModel& model, const TrainerState* trainer);
// Copies DIR's weights into `model`, after checking that config.json describes the same model.
void load_weights(const std::string& dir, LanguageModel& model);

// A trained model, its parameters on `device`. `checkpoint`: "" = RUNDIR's best, or its last
// if no evaluation made a best yet; "best"; "last"; or a checkpoint directory. Errors name
// what is missing or damaged and what to do.
struct LoadedModel {
  LmSettings settings;  // the run's options.json
  std::unique_ptr<LanguageModel> model;
  std::string checkpoint;  // the directory loaded
};
LoadedModel load_trained_model(const std::string& run_dir, Device device, const std::string& checkpoint = "");

}  // namespace qkgrad::lm
