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
#include "commands.h"
#include "training/program_main.h"

using namespace qkgrad;
using namespace qkgrad::translate_cli;

int main(int argc, char** argv) {
  static constexpr training::Subcommand kCommands[] = {
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
  return training::run_program({"qkgrad-translate", kCommands,
                                "train, translate, eval, score, grads, attention and attention-stats run the model on --device cpu|cuda\n"
                                "(default cpu; a run trained on one device loads on the other).\n",
                                &g_comm},
                               argc, argv);
}
