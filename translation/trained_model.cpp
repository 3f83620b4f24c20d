#include "translation/trained_model.h"

#include <vector>

#include "core/error.h"
#include "io/checkpoint.h"

namespace qkgrad::translation {

using training::checkpoint_path;
using training::RunDir;

LoadedModel load_trained_model(const std::string& run_dir, Device device, const std::string& checkpoint) {
  const RunDir run{run_dir};
  training::check_is_run_directory(run_dir);
  QKGRAD_CHECK(checkpoint.find(',') == std::string::npos, "--checkpoint ", checkpoint, ": an ensemble (a list A,B) is "
               "for decoding, with translate and eval; this command uses one model (to combine checkpoints into one, "
               "`average` them)");
  LoadedModel loaded;
  loaded.checkpoint = checkpoint_path(run, checkpoint);
  if (checkpoint.empty()) {
    QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), run_dir, " has no checkpoint (neither ", run.best(), " nor ",
                 run.last(), "); train first");
  } else {
    QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), "--checkpoint ", checkpoint, ": ", loaded.checkpoint,
                 " is not a checkpoint (choose best, last, or a checkpoint directory such as ", run.checkpoints(),
                 "/step-N)");
  }
  // A damaged file gets an error that says which file, what is wrong with it, and what to do.
  const std::string remedy =
      loaded.checkpoint == run.best() && checkpoint_exists(run.last())
          ? cat("; if ", run.last(), " is intact, move ", run.best(), " away to use it; otherwise train again")
          : cat("; train again (or, if training is still running, wait for its next checkpoint)");
  try {
    loaded.subwords = std::make_unique<Subwords>(subwords_file(run));
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
               config.vocab, " but ", subwords_file(run), " has ", loaded.subwords->vocab_size(),
               " pieces; the run directory mixes files of two runs");
  // The same pieces, scores and normaliser: the same vocabulary, whichever training wrote the
  // file (checkpoints before 2026-12-04 name it by the file's bytes: that is accepted too).
  QKGRAD_CHECK(config.vocabulary_id.empty() || loaded.subwords->identifies(config.vocabulary_id), loaded.checkpoint,
               " was trained with another subword model than ", subwords_file(run), " (vocabulary ", config.vocabulary_id,
               ", but the file is ", loaded.subwords->fingerprint(),
               "): the run directory mixes files of two runs; put the checkpoint back in the run it came from");
  if (config.vocabulary_id.empty()) config.vocabulary_id = loaded.subwords->fingerprint();
  loaded.model = std::make_unique<Seq2SeqTransformer>(config, device);
  try {
    load_model_weights(loaded.checkpoint, *loaded.model);
  } catch (const Error& e) {
    fail(cat("cannot load checkpoint ", loaded.checkpoint, ": ", e.what(), remedy));
  }
  loaded.model->eval();
  return loaded;
}

std::vector<Seq2SeqTransformer*> LoadedModel::members() const {
  std::vector<Seq2SeqTransformer*> all{model.get()};
  for (const auto& m : others) all.push_back(m.get());
  return all;
}

LoadedModel load_ensemble(const std::string& run_dir, Device device, const std::string& checkpoints) {
  std::vector<std::string> names;
  for (std::size_t start = 0;;) {
    const std::size_t comma = checkpoints.find(',', start);
    names.push_back(checkpoints.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (names.size() == 1) return load_trained_model(run_dir, device, checkpoints);
  for (const std::string& n : names) {
    QKGRAD_CHECK(!n.empty(), "--checkpoint ", checkpoints, ": an empty name in the list (write A,B: best, last or "
                 "checkpoint directories, separated by commas)");
  }
  LoadedModel ensemble = load_trained_model(run_dir, device, names[0]);
  for (std::size_t i = 1; i < names.size(); ++i) {
    LoadedModel member = load_trained_model(run_dir, device, names[i]);
    ensemble.checkpoint += "," + member.checkpoint;
    ensemble.others.push_back(std::move(member.model));
  }
  return ensemble;
}

}  // namespace qkgrad::translation
