// qkgrad-lm: the language-model program. Subcommands:
//   prepare   build the embedded English corpus (the World English Bible) from Debian packages
//   train     train a decoder-only Transformer on a text's bytes (any attention mode)
//   eval      loss, perplexity and bits per byte of a trained model on a text
//   generate  text from a trained model after a prompt (temperature, top-k, seed; KV cache)
// Every subcommand has --help. Exit status: 0 success, 1 error, 2 usage error (also --device
// cuda where CUDA cannot run), 128 + the signal when train stops on SIGINT, SIGHUP or SIGTERM.
#include <algorithm>
#include <csignal>
#include <iterator>
#include <memory>

#include "commands.h"
#include "training/data_parallel.h"
#include "training/stop_signals.h"

using namespace qkgrad;
using namespace qkgrad::lm_cli;
using namespace qkgrad::training;

namespace qkgrad::lm_cli {
distributed::Communicator* g_comm = nullptr;
}  // namespace qkgrad::lm_cli

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};
constexpr Command kCommands[] = {
    {"prepare", "build the English corpus (World English Bible) from Debian's SWORD packages", cmd_prepare},
    {"train", "train a decoder-only Transformer on the bytes of a text", cmd_train},
    {"eval", "loss, perplexity and bits per byte of a trained model on a text", cmd_eval},
    {"generate", "text from a trained model after a prompt", cmd_generate},
};

std::string usage() {
  std::string text = "usage: qkgrad-lm COMMAND [options]   (COMMAND --help for its options; --version)\ncommands:\n";
  for (const Command& c : kCommands) text += cat("  ", c.name, std::string(10 - std::string(c.name).size(), ' '), c.summary, "\n");
  return text + "a first run: qkgrad-lm prepare && qkgrad-lm train --data data/english --run runs/lm --preset demo &&\n"
                "             qkgrad-lm generate --run runs/lm --prompt 'In the beginning'\n";
}

}  // namespace

int main(int argc, char** argv) {
  StopSignals::route_to_watcher();  // before any thread starts
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "--version") {
    std::printf("qkgrad-lm %s (qkgrad %s)\n", QKGRAD_VERSION, QKGRAD_VERSION);
    return 0;
  }
  const auto found = std::find_if(std::begin(kCommands), std::end(kCommands), [&](const Command& c) { return command == c.name; });
  if (found == std::end(kCommands)) {
    std::fprintf(stderr, "qkgrad-lm: unknown command '%s'\n%s", command.c_str(), usage().c_str());
    return 2;
  }
  std::signal(SIGXFSZ, SIG_IGN);  // over ulimit -f a write fails (reported) instead of killing us
  std::unique_ptr<distributed::Communicator> comm;
  auto exit_status = [&](int status) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (comm && comm->size() > 1) comm->abort_job(status);
    return status;
  };
  try {
    if (command == "train") {
      comm = distributed::from_launcher();
      g_comm = comm.get();
    } else if (distributed::launched_ranks() > 1) {
      throw UsageError(cat("qkgrad-lm ", command, ": started by mpirun as one of ", distributed::launched_ranks(),
                           " ranks; only `train` runs data-parallel: run ", command, " without mpirun"));
    }
    return found->run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return exit_status(2);
  } catch (const Interrupted& e) {
    std::fprintf(stderr, "qkgrad-lm %s: %s\n", command.c_str(), e.what());
    return exit_status(e.exit_status());
  } catch (const JobWideError& e) {
    if (!comm || comm->is_root()) std::fprintf(stderr, "qkgrad-lm %s: error: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const Error& e) {
    const std::string rank = comm && comm->size() > 1 ? cat(" (rank ", comm->rank(), " of ", comm->size(), ")") : "";
    std::fprintf(stderr, "qkgrad-lm %s%s: error: %s\n", command.c_str(), rank.c_str(), e.what());
    return exit_status(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkgrad-lm %s: unexpected error: %s\n", command.c_str(), e.what());
    return exit_status(1);
  }
}
