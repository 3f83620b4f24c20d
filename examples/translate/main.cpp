// qkgrad-translate: the translation program. Subcommands:
//   prepare-bible  build the embedded Spanish→English Bible corpus from Debian packages
//   train          train a Transformer (QKNorm or scaled dot-product) with subwords and BLEU
//   translate      translate sentences with beam search
//   eval           translate a split and score it (BLEU, chrF)
//   score          the model's log-probability of given translations (rescoring)
//   average        average the parameters of several checkpoints into a new one
//   bleu           score a hypothesis file against a reference (sacreBLEU-compatible)
//   grads          dump one batch's loss and gradients for cross-checking other frameworks
//   attention      draw every layer's and head's attention for one sentence (SVG)
//   attention-stats  attention entropy / max probability / saturation per module on a split
// Every subcommand has --help. The ones that run the model take --device cpu|cuda (default cpu).
// Exit status: 0 success, 1 error, 2 usage error (also --device cuda where CUDA cannot run),
// 128 + the signal when train stops on SIGINT (130), SIGHUP (129) or SIGTERM (143).
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iterator>
#include <memory>
#include <string>

#include "commands.h"

using namespace qkgrad;
using namespace qkgrad::translate_cli;

namespace {

// The subcommands, each with its own options (COMMAND --help).
struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};
constexpr Command kCommands[] = {
    {"prepare-bible", "build the Spanish->English Bible corpus from Debian's SWORD packages", cmd_prepare_bible},
    {"train", "train a translation Transformer (QKNorm or scaled dot-product attention)", cmd_train},
    {"translate", "translate sentences (stdin or --input) with beam search", cmd_translate},
    {"eval", "translate a data split and report BLEU and chrF", cmd_eval},
    {"score", "the model's log-probability of given translations (rescoring)", cmd_score},
    {"average", "average the parameters of several checkpoints into a new one", cmd_average},
    {"bleu", "corpus BLEU and chrF of a hypothesis file against a reference", cmd_bleu},
    {"grads", "write one batch's loss and every gradient (safetensors) for cross-checks", cmd_grads},
    {"attention", "draw the attention of every layer and head for one sentence (SVG)", cmd_attention},
    {"attention-stats", "attention entropy, max probability and saturation of every module on a split",
     cmd_attention_stats},
};

std::string usage() {
  std::string text = "usage: qkgrad-translate COMMAND [options]   (COMMAND --help for its options; --version)\ncommands:\n";
  for (const Command& c : kCommands) text += cat("  ", c.name, std::string(17 - std::string(c.name).size(), ' '), c.summary, "\n");
  return text +
         "train, translate, eval, score, grads, attention and attention-stats run the model on --device cpu|cuda\n"
         "(default cpu; a run trained on one device loads on the other).\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: stop signals go to one waiting thread, never to a computing one.
  StopSignals::route_to_watcher();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "--version") {
    std::printf("qkgrad-translate %s (qkgrad %s)\n", QKGRAD_VERSION, QKGRAD_VERSION);
    return 0;
  }
  const auto found = std::find_if(std::begin(kCommands), std::end(kCommands), [&](const Command& c) { return command == c.name; });
  if (found == std::end(kCommands)) {
    std::fprintf(stderr, "qkgrad-translate: unknown command '%s'\n%s", command.c_str(), usage().c_str());
    return 2;
  }
  // Over a file size limit (ulimit -f), a write fails with EFBIG and is reported like a full
  // disk, instead of the signal ending the program with a half-written file.
  std::signal(SIGXFSZ, SIG_IGN);
  // Under mpirun (several ranks), `train` trains data-parallel; the other commands are one process.
  std::unique_ptr<distributed::Communicator> comm;
  // A rank that fails alone ends the whole job (MPI_Abort), so that no other rank waits for it
  // forever; a failure every rank meets at the same point (JobWideError) ends each normally.
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
      throw UsageError(cat("qkgrad-translate ", command, ": started by mpirun as one of ", distributed::launched_ranks(),
                           " ranks; only `train` runs data-parallel: run ", command, " without mpirun"));
    }
    return found->run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return exit_status(2);
  } catch (const Interrupted& e) {
    std::fprintf(stderr, "qkgrad-translate %s: %s\n", command.c_str(), e.what());
    return exit_status(e.exit_status());
  } catch (const JobWideError& e) {
    if (!comm || comm->is_root()) std::fprintf(stderr, "qkgrad-translate %s: error: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const Error& e) {
    const std::string rank = comm && comm->size() > 1 ? cat(" (rank ", comm->rank(), " of ", comm->size(), ")") : "";
    std::fprintf(stderr, "qkgrad-translate %s%s: error: %s\n", command.c_str(), rank.c_str(), e.what());
    return exit_status(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkgrad-translate %s: unexpected error: %s\n", command.c_str(), e.what());
    return exit_status(1);
  }
}
