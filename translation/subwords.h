// Joint subword vocabulary (SentencePiece, Kudo & Richardson 2018), shared by source and target.
// Ids: 0 pad, 1 bos, 2 eos, 3 unk (the Transformer's defaults), then the learned pieces.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/transformer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace qkgrad::translation {

struct SubwordTraining {
  std::vector<std::string> text_files;  // all training text, source and target
  std::string model_path;               // where to write the model (…/subwords.model)
  int vocab_size = 8000;
  uint64_t seed = 1;
  std::string model_type = "unigram";   // or "bpe"
};

class Subwords {
 public:
  // Trains a model. SentencePiece runs in a child process (it can abort on bad input and prints
  // a lot); its failure is an Error with its message and what to do (e.g. a smaller vocabulary).
  // The child dies with this process; a stop signal (training/stop_signals.h) ends it, removes
  // its temporaries and throws Interrupted.
  static void train(const SubwordTraining& options);

  explicit Subwords(const std::string& model_path);
  ~Subwords();
  Subwords(const Subwords&) = delete;
  Subwords& operator=(const Subwords&) = delete;

  std::vector<int64_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int64_t>& ids) const;  // pad/bos/eos are skipped
  std::vector<std::string> pieces(const std::string& text) const;
  std::string piece(int64_t id) const;
  int64_t vocab_size() const;
  // Identifies this vocabulary by what encoding and decoding depend on: "spm-fnv1a64:" and the
  // 64-bit FNV-1a hash of the pieces (text, score, type), the normaliser and denormaliser, and
  // the trainer settings the processor reads (model type, special ids and pieces, whitespace
  // and byte fallback), in hex. Not the file's bytes: the file also records the trainer's input
  // paths and thread count, which differ between two trainings of the same vocabulary.
  // Checkpoints record it (TransformerConfig::vocabulary_id), so that a model is never run with
  // another vocabulary of the same size.
  const std::string& fingerprint() const { return fingerprint_; }
  // What checkpoints saved before 2026-12-04 recorded: "fnv1a64:" and the hash of the file.
  const std::string& file_fingerprint() const { return file_fingerprint_; }
  // Whether a checkpoint's vocabulary_id names this vocabulary (either form).
  bool identifies(const std::string& vocabulary_id) const {
    return vocabulary_id == fingerprint_ || vocabulary_id == file_fingerprint_;
  }

  static constexpr int64_t pad_id = SpecialIds{}.pad, bos_id = SpecialIds{}.bos, eos_id = SpecialIds{}.eos,
                           unk_id = SpecialIds{}.unk;  // nn/transformer.h

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string path_;
  std::string fingerprint_, file_fingerprint_;
};

}  // namespace qkgrad::translation
