// A trained translation model loaded back from its run directory (training/run_dir.h), with
// the joint SentencePiece model the run keeps beside its checkpoints: RUNDIR/subwords.model and
// RUNDIR/subwords.vocab.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "nn/transformer.h"
#include "training/run_dir.h"
#include "translation/subwords.h"

namespace qkgrad::translation {

// The run directory's subword model (and its .vocab beside it), and every file of the subwords
// at its top, temporaries included: what a new run may find there (training/run_dir.h).
inline std::string subwords_file(const training::RunDir& run) { return run.file("subwords.model"); }
inline const std::vector<std::string>& subword_files() {
  static const std::vector<std::string> names = {"subwords.model", "subwords.vocab", "subword_training.txt",
                                                 "subwords.tmp-" /* SentencePiece writing, or a dead trainer's */};
  return names;
}

// A trained model and its vocabulary, with its parameters on `device` (whatever device it was
// trained on). `checkpoint` (the programs' --checkpoint) says which: "" = RUNDIR's best, or its
// last if no evaluation has produced a best yet; "best"; "last"; or the path of a checkpoint
// directory (e.g. one kept by --keep-last, or made by `average`), used with RUNDIR's subwords.
// Errors name what is missing.
struct LoadedModel {
  std::unique_ptr<Subwords> subwords;
  std::unique_ptr<Seq2SeqTransformer> model;
  std::string checkpoint;  // which one was loaded (an ensemble's: "A,B")
  // An ensemble's other members (load_ensemble), with the same vocabulary as `model`.
  std::vector<std::unique_ptr<Seq2SeqTransformer>> others;
  std::vector<Seq2SeqTransformer*> members() const;  // model, then the others
};
LoadedModel load_trained_model(const std::string& run_dir, Device device = Device::cpu, const std::string& checkpoint = "");
// An ensemble (translate and eval --checkpoint A,B,...): every checkpoint of the comma-separated
// list loaded as load_trained_model loads one, each checked against RUNDIR's subwords (so a
// checkpoint of another run of the same data fits; their sizes may differ). One name loads one.
LoadedModel load_ensemble(const std::string& run_dir, Device device, const std::string& checkpoints);

}  // namespace qkgrad::translation
