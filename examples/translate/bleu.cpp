// qkgrad-translate bleu: sacreBLEU-compatible BLEU and chrF of a hypothesis file.
#include "commands.h"

namespace qkgrad::translate_cli {

int cmd_bleu(int argc, char** argv) {
  std::vector<std::string> ref_files;
  std::string hyp, tokenize = "13a";
  Args args("qkgrad-translate bleu", "BLEU and chrF of --hyp (or stdin) against one or more --ref files, computed and printed\n"
                                     "as sacreBLEU 2.x does (its signatures, its text and JSON forms).");
  args.list("ref", "a reference file; give --ref again for several references per line (multi-reference)", &ref_files,
            true);
  args.option("hyp", "hypothesis file (default: stdin)", &hyp);
  args.choice("tokenize", "13a (sacreBLEU's default) or none (pre-tokenised text)", &tokenize, {"13a", "none"});
  ScoreFlags flags(args);
  if (!args.parse(argc, argv, 2)) return 0;
  ReferenceStreams refs;
  for (const std::string& f : ref_files) refs.push_back(read_text_lines(f));
  const std::vector<std::string> hyps = read_input_lines(hyp);
  print_scores(hyps, refs, hyp.empty() ? "bleu: the hypothesis (stdin)" : "bleu: " + hyp, ref_files,
               flags.report(parse_bleu_tokenize(tokenize)));
  return 0;
}

}  // namespace qkgrad::translate_cli
