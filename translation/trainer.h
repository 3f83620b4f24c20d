// `qkgrad-translate train`: subwords, batches, the training loop with evaluation, checkpoints,
// exact resume, progress display and curves.
#pragma once

#include <cstdint>
#include <string>

#include "distributed/communicator.h"
#include "translation/settings.h"

namespace qkgrad::translation {

// One `train` command: the run's settings (translation/settings.h, written to options.json)
// and what belongs to this process only.
struct TrainOptions {
  RunSettings settings;
  std::string run_dir;
  bool resume = false;
  int64_t threads = 0;               // 0: all cores
  std::string on_nan = "stop";       // stop (save the last good state, exit 1) or skip (the batch)
  // For tests of the NaN guard: make the loss of this step (1-based) NaN. 0: never.
  int64_t inject_nan_at_step = 0;
  // For tests of a rank's death in a data-parallel job: the last rank kills itself (SIGKILL)
  // at the start of this step (1-based). 0: never.
  int64_t inject_rank_death_at_step = 0;
};

// Runs the whole training; returns the process exit status (0, or 130 after Ctrl-C).
int train(const TrainOptions& options);
// The same, as one rank of a data-parallel job (training/data_parallel.h): every rank calls
// it with the same options; rank 0 writes the run directory.
int train(const TrainOptions& options, distributed::Communicator& comm);

}  // namespace qkgrad::translation
