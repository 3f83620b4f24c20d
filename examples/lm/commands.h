// qkgrad-lm's subcommands: what they share and their entry points, one file each (prepare.cpp,
// train.cpp, eval.cpp, generate.cpp).
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli/args.h"
#include "cli/setting_flags.h"
#include "core/backend.h"
#include "core/error.h"
#include "corpora/bible.h"
#include "distributed/communicator.h"
#include "io/text.h"
#include "lm/evaluation.h"
#include "lm/sampling.h"
#include "lm/settings.h"
#include "lm/text_data.h"
#include "lm/trained_model.h"
#include "lm/trainer.h"
#include "training/device_flag.h"
#include "training/run_dir.h"

namespace qkgrad::lm_cli {

using namespace qkgrad::lm;

inline constexpr const char* kCheckpointHelp =
    "which checkpoint: best (the default; last if there is none yet), last, or a checkpoint directory";
inline constexpr const char* kDeviceHelp = "where the model runs: cpu or cuda (a run trained on one device loads on the other)";

// --threads N (default: all cores).
struct ThreadsFlag {
  int64_t threads = 0;
  explicit ThreadsFlag(Args& args) { args.option("threads", "CPU threads (default: all)", &threads, 1, 4096)->default_str("all"); }
  void apply() const {
    if (threads > 0) set_num_threads(static_cast<int>(threads));
  }
};

// The job's communicator, made by main() for `train`: MPI under mpirun, else one process.
extern distributed::Communicator* g_comm;

int cmd_prepare(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_generate(int argc, char** argv);

}  // namespace qkgrad::lm_cli
