// `qkgrad-translate train`: subwords, batches, the training loop with evaluation, checkpoints,
// exact resume, progress display and curves.
#pragma once

#include <cstdint>
#include <string>

#include "nn/transformer.h"

namespace qkgrad::translation {

// Model size and training recipe. The paper's gl→en recipe is the "paper" preset; "demo" is sized
// to train in about 20 minutes on 2 cores (README).
struct Preset {
  std::string name;
  int64_t layers = 3, d_model = 256, heads = 4, ffn = 1024;
  double dropout = 0.1, attention_dropout = 0.1, ffn_dropout = 0.1, word_dropout = 0.1;
  int64_t vocab_size = 8000;
  int64_t batch_tokens = 4096;   // padded tokens per batch (max of the source and target sides)
  double lr = 1e-3;              // peak learning rate
  int64_t warmup = 4000;         // linear warmup steps
  int64_t max_steps = 100000;
  int64_t eval_every = 1000;     // steps between dev evaluations
  int64_t eval_sentences = 500;  // dev sentences translated for BLEU at each evaluation (0: all)
  double max_minutes = 0;        // 0: no time budget (a safety stop; the step budget decides)
  std::string schedule = "plateau";  // plateau (the paper's), cosine (to 0 at max_steps), inverse_sqrt
};
Preset preset_by_name(const std::string& name);  // tiny (smoke tests), demo, small, paper

struct TrainOptions {
  std::string data_dir, src = "es", tgt = "en", run_dir;
  std::string attention = "qknorm";  // or scaled_dot
  std::string norm = "layer_norm";   // or scale_norm
  std::string preset = "small";
  std::string schedule;              // empty: the preset's (plateau, cosine or inverse_sqrt)
  double max_minutes = -1;           // < 0: the preset's
  int64_t max_steps = -1, vocab_size = -1, batch_tokens = -1, warmup = -1, eval_every = -1, eval_sentences = -1;
  int64_t layers = -1, d_model = -1, heads = -1, ffn = -1;  // model size overrides (-1: the preset's)
  double dropout = -1;                                       // all dropouts at once (-1: the preset's)
  double lr = -1;
  int64_t seed = 1;
  int64_t patience = 10;             // stop after this many evaluations without a better dev BLEU
  double label_smoothing = 0.1;
  double clip = 1.0;
  int64_t beam = 4;
  double alpha = 0.6;
  int64_t max_length = 250;          // drop training pairs longer than this many subwords
  std::string bleu_tokenize = "13a"; // or none (pre-tokenised data)
  int64_t threads = 0;
  std::string device = "cpu";        // or cuda; recorded in options.json, may change on --resume
  int64_t save_every = 0;            // also save checkpoints/last every this many steps (0: at evaluations only)
  bool resume = false;
  std::string on_nan = "stop";       // stop (save the last good state, exit 1) or skip (the batch)
  // For tests of the NaN guard: make the loss of this step (1-based) NaN. 0: never.
  int64_t inject_nan_at_step = 0;
};

// Runs the whole training; returns the process exit status (0, or 130 after Ctrl-C).
int train(const TrainOptions& options);

}  // namespace qkgrad::translation
