// `qkgrad-lm train`: a decoder-only language model on a text's bytes, on the training harness
// (training/trainer.h): AdamW, warmup then cosine, validation loss / perplexity / bits per
// byte, checkpoints, exact resume, progress display and curves.
#pragma once

#include <cstdint>
#include <string>

#include "distributed/communicator.h"
#include "lm/settings.h"

namespace qkgrad::lm {

// One `train` command: the run's settings (written to options.json) and what belongs to this
// process only.
struct TrainOptions {
  LmSettings settings;
  std::string run_dir;
  bool resume = false;
  int64_t threads = 0;          // 0: all cores
  std::string on_nan = "stop";  // stop (save the last good state, exit 1) or skip (the batch)
  int64_t inject_nan_at_step = 0;  // tests of the NaN guard: this step's loss is NaN (0: never)
};

// Checked before anything is read or written (a usage error creates no run directory): the
// settings' ranges, the model's shape, the device and the precision. Returns the device.
Device check_train_settings(const LmSettings& s);

// Runs the whole training as one rank of `comm` (a single process: a communicator of one);
// returns the process exit status: 0, or 128 + the signal that stopped it.
int train(const TrainOptions& options, distributed::Communicator& comm);

}  // namespace qkgrad::lm
