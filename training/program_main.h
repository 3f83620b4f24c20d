// The main() of a program made of subcommands (qkgrad-translate, qkgrad-lm): --help, --version,
// dispatch to COMMAND, and one place that turns every error into a message and an exit status.
#pragma once

#include <span>
#include <string>

#include "distributed/communicator.h"

namespace qkgrad::training {

struct Subcommand {
  const char* name;
  const char* summary;  // one line in the usage text
  int (*run)(int argc, char** argv);
};

struct Program {
  const char* name;                       // "qkgrad-lm"
  std::span<const Subcommand> commands;   // the first word on the command line picks one
  std::string usage_tail;                 // printed after the command list (a first run, notes)
  distributed::Communicator** train_job;  // where `train` finds its job (one rank, or mpirun's ranks)
};

// Runs the subcommand argv[1] names and returns main's exit status: 0 success, 1 error, 2 usage
// error, 128 + the signal when train stops on SIGINT, SIGHUP or SIGTERM. Only `train` may be
// started by mpirun as several ranks; a rank that fails alone ends the whole job (MPI_Abort) so
// that no other rank waits for it forever, while a failure every rank meets at the same point
// (JobWideError) is reported once, by rank 0, and ends each rank normally.
int run_program(const Program& program, int argc, char** argv);

}  // namespace qkgrad::training
