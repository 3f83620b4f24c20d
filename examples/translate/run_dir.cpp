#include "translate/run_dir.h"

#include <filesystem>

#include "core/error.h"
#include "nn/checkpoint.h"

namespace qkgrad::translate {

LoadedModel load_trained_model(const std::string& run_dir, Device device) {
  const RunDir run{run_dir};
  QKGRAD_CHECK(std::filesystem::is_directory(run_dir), "run directory ", run_dir,
               " does not exist (train a model first: qkgrad-translate train --run ", run_dir, " ...)");
  LoadedModel loaded;
  loaded.checkpoint = checkpoint_exists(run.best()) ? run.best() : run.last();
  QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), run_dir, " has no checkpoint (neither ", run.best(), " nor ",
               run.last(), "); train first");
  // A damaged file gets an error that says which file, what is wrong with it, and what to do.
  const std::string remedy =
      loaded.checkpoint == run.best() && checkpoint_exists(run.last())
          ? cat("; if ", run.last(), " is intact, move ", run.best(), " away to use it; otherwise train again")
          : cat("; train again (or, if training is still running, wait for its next checkpoint)");
  try {
    loaded.subwords = std::make_unique<Subwords>(run.subwords());
  } catch (const Error& e) {
    fail(cat(e.what(), "; the run directory ", run_dir, " is incomplete or damaged: train again"));
  }
  TransformerConfig config;
  try {
    config = load_checkpoint_config(loaded.checkpoint);
  } catch (const Error& e) {
    fail(cat("cannot load checkpoint ", loaded.checkpoint, ": ", e.what(), remedy));
  }
  QKGRAD_CHECK(config.vocab == loaded.subwords->vocab_size(), loaded.checkpoint, " was trained with a vocabulary of ",
               config.vocab, " but ", run.subwords(), " has ", loaded.subwords->vocab_size(),
               " pieces; the run directory mixes files of two runs");
  loaded.model = std::make_unique<Seq2SeqTransformer>(config, device);
  try {
    load_model_weights(loaded.checkpoint, *loaded.model);
  } catch (const Error& e) {
    fail(cat("cannot load checkpoint ", loaded.checkpoint, ": ", e.what(), remedy));
  }
  loaded.model->eval();
  return loaded;
}

}  // namespace qkgrad::translate
