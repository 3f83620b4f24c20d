// qkgrad-lm: the language-model program. Subcommands:
//   prepare   build the embedded English corpus (the World English Bible) from Debian packages
//   train     train a decoder-only Transformer on a text's bytes (any attention mode)
//   eval      loss, perplexity and bits per byte of a trained model on a text
//   generate  text from a trained model after a prompt (temperature, top-k, seed; KV cache)
// Every subcommand has --help. Exit status: 0 success, 1 error, 2 usage error (also --device
// cuda where CUDA cannot run), 128 + the signal when train stops on SIGINT, SIGHUP or SIGTERM.
#include "commands.h"
#include "training/program_main.h"

using namespace qkgrad;
using namespace qkgrad::lm_cli;

namespace qkgrad::lm_cli {
distributed::Communicator* g_comm = nullptr;
}  // namespace qkgrad::lm_cli

int main(int argc, char** argv) {
  static constexpr training::Subcommand kCommands[] = {
      {"prepare", "build the English corpus (World English Bible) from Debian's SWORD packages", cmd_prepare},
      {"train", "train a decoder-only Transformer on the bytes of a text", cmd_train},
      {"eval", "loss, perplexity and bits per byte of a trained model on a text", cmd_eval},
      {"generate", "text from a trained model after a prompt", cmd_generate},
  };
  return training::run_program({"qkgrad-lm", kCommands,
                                "a first run: qkgrad-lm prepare && qkgrad-lm train --data data/english --run runs/lm --preset demo &&\n"
                                "             qkgrad-lm generate --run runs/lm --prompt 'In the beginning'\n",
                                &g_comm},
                               argc, argv);
}
