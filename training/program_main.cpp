#include "training/program_main.h"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "training/data_parallel.h"
#include "training/stop_signals.h"

namespace qkgrad::training {
namespace {

std::string usage(const Program& program) {
  size_t width = 0;
  for (const Subcommand& c : program.commands) width = std::max(width, std::string(c.name).size());
  std::string text = cat("usage: ", program.name, " COMMAND [options]   (COMMAND --help for its options; --version)\ncommands:\n");
  for (const Subcommand& c : program.commands)
    text += cat("  ", c.name, std::string(width + 2 - std::string(c.name).size(), ' '), c.summary, "\n");
  return text + program.usage_tail;
}

// The command's run, with every error it throws turned into a message and an exit status.
int run_reporting_errors(const Program& program, const Subcommand& command, int argc, char** argv) {
  const std::string name = command.name;
  std::unique_ptr<distributed::Communicator> comm;
  auto exit_status = [&](int status) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (comm && comm->size() > 1) comm->abort_job(status);
    return status;
  };
  try {
    if (name == "train") {
      comm = distributed::from_launcher();
      *program.train_job = comm.get();
    } else if (distributed::launched_ranks() > 1) {
      throw UsageError(cat(program.name, " ", name, ": started by mpirun as one of ", distributed::launched_ranks(),
                           " ranks; only `train` runs data-parallel: run ", name, " without mpirun"));
    }
    return command.run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return exit_status(2);
  } catch (const Interrupted& e) {
    std::fprintf(stderr, "%s %s: %s\n", program.name, name.c_str(), e.what());
    return exit_status(e.exit_status());
  } catch (const JobWideError& e) {
    if (!comm || comm->is_root()) std::fprintf(stderr, "%s %s: error: %s\n", program.name, name.c_str(), e.what());
    return 1;
  } catch (const Error& e) {
    const std::string rank = comm && comm->size() > 1 ? cat(" (rank ", comm->rank(), " of ", comm->size(), ")") : "";
    std::fprintf(stderr, "%s %s%s: error: %s\n", program.name, name.c_str(), rank.c_str(), e.what());
    return exit_status(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s %s: unexpected error: %s\n", program.name, name.c_str(), e.what());
    return exit_status(1);
  }
}

}  // namespace

int run_program(const Program& program, int argc, char** argv) {
  // Before any thread starts: stop signals go to one waiting thread, never to a computing one.
  StopSignals::route_to_watcher();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(usage(program).c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  if (name == "--version") {
    std::printf("%s %s (qkgrad %s)\n", program.name, QKGRAD_VERSION, QKGRAD_VERSION);
    return 0;
  }
  const auto found = std::find_if(program.commands.begin(), program.commands.end(),
                                  [&](const Subcommand& c) { return name == c.name; });
  if (found == program.commands.end()) {
    std::fprintf(stderr, "%s: unknown command '%s'\n%s", program.name, name.c_str(), usage(program).c_str());
    return 2;
  }
  // Over a file size limit (ulimit -f), a write fails with EFBIG and is reported like a full
  // disk, instead of the signal ending the program with a half-written file.
  std::signal(SIGXFSZ, SIG_IGN);
  return run_reporting_errors(program, *found, argc, argv);
}

}  // namespace qkgrad::training
