#include "translate/run_dir.h"

#include <filesystem>

#include "core/error.h"
#include "nn/checkpoint.h"

namespace qkgrad::translate {

LoadedModel load_trained_model(const std::string& run_dir) {
  const RunDir run{run_dir};
  QKGRAD_CHECK(std::filesystem::is_directory(run_dir), "run directory ", run_dir,
               " does not exist (train a model first: qkgrad-translate train --run ", run_dir, " ...)");
  LoadedModel loaded;
  loaded.checkpoint = checkpoint_exists(run.best()) ? run.best() : run.last();
  QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), run_dir, " has no checkpoint (neither ", run.best(), " nor ",
               run.last(), "); train first");
  loaded.subwords = std::make_unique<Subwords>(run.subwords());
  const TransformerConfig config = load_checkpoint_config(loaded.checkpoint);
  QKGRAD_CHECK(config.vocab == loaded.subwords->vocab_size(), loaded.checkpoint, " was trained with a vocabulary of ",
               config.vocab, " but ", run.subwords(), " has ", loaded.subwords->vocab_size(),
               " pieces; the run directory mixes files of two runs");
  loaded.model = std::make_unique<Seq2SeqTransformer>(config);
  load_model_weights(loaded.checkpoint, *loaded.model);
  loaded.model->eval();
  return loaded;
}

}  // namespace qkgrad::translate
