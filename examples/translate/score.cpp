#include "commands.h"

namespace qkgrad::translate_cli {

// `score`: the model's log-probability of given translations, one line per pair.
int cmd_score(int argc, char** argv) {
  std::string run, src, tgt, output, device = "cpu", checkpoint;
  bool normalize = false;
  int64_t max_length = 1024;
  Args args("qkgrad-translate score",
            "Scores given translations with the model (for rescoring, as Marian's scorer or fairseq's\n"
            "--score-reference): for each line pair of --src and --tgt, log P(tgt | src) = the sum of the\n"
            "natural-log probabilities of the target's subwords and its end-of-sentence token, teacher-forced,\n"
            "dropout off. One number per line, in order.");
  args.option("run", "run directory", &run, true);
  args.option("src", "source sentences", &src, true);
  args.option("tgt", "their translations, line by line", &tgt, true);
  args.option("output", "output file (default: stdout)", &output);
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.flag("normalize", "divide each score by its token count (the target's subwords + 1)", &normalize);
  args.option("max-length", "the longest line scored, in subwords (a longer one is an error naming it)", &max_length, 1, 100000);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate score", device);
  if (!output.empty()) check_can_write(output, "score: --output " + output);
  const std::vector<std::string> sources = read_text_lines(src), targets = read_text_lines(tgt);
  QKGRAD_CHECK(sources.size() == targets.size(), "score: ", src, " has ", sources.size(), " lines but ", tgt, " has ",
               targets.size(), "; they must be aligned line by line");
  LoadedModel m = load_trained_model(run, on, checkpoint);
  std::vector<Pair> pairs;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    Pair p{m.subwords->encode(normalize_spaces(sources[i])), m.subwords->encode(normalize_spaces(targets[i]))};
    for (const auto& [side, path] : {std::pair{&p.src, &src}, std::pair{&p.tgt, &tgt}}) {
      QKGRAD_CHECK(static_cast<int64_t>(side->size()) <= max_length, "score: ", *path, ":", i + 1, ": the line is ",
                   side->size(), " subwords long, more than --max-length ", max_length,
                   " (a cropped line would get another sentence's score); raise --max-length or split it");
    }
    pairs.push_back(std::move(p));
  }
  std::string text;
  for (const PairScore& s : score_pairs(*m.model, pairs)) {
    char number[32];
    std::snprintf(number, sizeof number, "%.6f\n", normalize ? s.log_prob / static_cast<double>(s.tokens) : s.log_prob);
    text += number;
  }
  if (output.empty()) {
    std::fputs(text.c_str(), stdout);
    check_stdout("score: writing the scores");
  } else {
    write_file_atomically(output, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  }
  return 0;
}

}  // namespace qkgrad::translate_cli
