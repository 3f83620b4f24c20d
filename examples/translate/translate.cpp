// qkgrad-translate translate: beam search over stdin or --input, one translation per line.
#include "commands.h"

namespace qkgrad::translate_cli {

int cmd_translate(int argc, char** argv) {
  std::string run, input, output, device = "cpu", checkpoint;
  BeamOptions beam;
  bool greedy = false, quiet = false;
  int64_t max_length = 1024, n_best = 0, batch_lines = 0;
  Args args("qkgrad-translate translate",
            "Translates one sentence per line from --input (or stdin) with batched beam search and writes the\n"
            "detokenised translations to --output (or stdout), one line per input line, in order. Lines are\n"
            "read and translated --batch-lines at a time, and on stdout each batch is written as soon as it\n"
            "is done (a pipe or a terminal gets its answers while the input goes on).");
  args.option("run", "run directory", &run, true);
  args.once(args.option("input", "input file (default: stdin)", &input), "translate one file at a time");
  args.option("output", "output file, written atomically at the end (default: stdout, as it goes)", &output);
  args.once(args.option("checkpoint", kEnsembleHelp, &checkpoint), kOneList);
  SearchFlags search(args, beam);
  CLI::Option* beam_given = search.beam_given;
  args.option("max-length", "longer lines are cropped to this many subwords (counted on stderr)", &max_length, 1, 100000);
  args.option("n-best", "write the K best of each line as `N ||| translation ||| F0= logP ||| score` (Moses/Marian: N "
              "counts lines from 0; F0 = log P(translation + eos), score = (log P - word penalty x length) / length penalty, the beam's ranking); "
              "K <= --beam", &n_best, 1, 64);
  args.option("batch-lines", "lines read and translated at a time, or fewer when the input pauses (default: 1 from a "
              "terminal, else 500)", &batch_lines, 1, 1000000);
  args.flag("greedy", "greedy decoding (beam 1)", &greedy);
  args.flag("sample", "sample instead of searching (back-translation): one sample per line, or --n-best K samples, "
            "best first", &beam.sampling.on);
  CLI::Option* sampling_flags[] = {
      args.option("temperature", "with --sample: draw from softmax(log p / T); below 1 sharper, above 1 flatter",
                  &beam.sampling.temperature, [](double t) { return t > 0 && t <= 1000; }, "between 0 (excluded) and 1000"),
      args.option("top-k", "with --sample: draw among the K most likely tokens only (0: all)", &beam.sampling.top_k, 0,
                  1000000),
      args.option("seed", "with --sample: the samples' seed (a line's samples depend only on it, the line's number and "
                  "the model)", &beam.sampling.seed, 0, std::numeric_limits<int64_t>::max())};
  args.flag("quiet", "nothing on stderr but errors (no note about cropped lines)", &quiet);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  search.apply();
  const Device on = parse_device("qkgrad-translate translate", device);
  for (CLI::Option* o : sampling_flags) {
    if (o->count() > 0 && !beam.sampling.on) throw UsageError(cat("qkgrad-translate translate: ", o->get_name(), " needs --sample"));
  }
  if (beam.sampling.on) {
    if (greedy || beam_given->count() > 0) {
      throw UsageError("qkgrad-translate translate: --sample draws instead of searching: leave out --beam and --greedy "
                       "(--n-best K gives K samples per line)");
    }
    if (beam.min_length > 0) {
      throw UsageError("qkgrad-translate translate: --min-length shapes the beam search; --sample draws from the model as "
                       "it is: leave out one of them");
    }
    beam.beam = std::max<int64_t>(n_best, 1);
  }
  if (greedy) beam.beam = 1;
  if (n_best > beam.beam) {
    throw UsageError(cat("qkgrad-translate translate: --n-best ", n_best, " needs --beam ", n_best, " or more (--beam is ",
                         beam.beam, ")"));
  }
  if (batch_lines == 0) batch_lines = input.empty() && ::isatty(STDIN_FILENO) ? 1 : 500;
  if (!output.empty()) check_can_write(output, "translate: --output " + output);  // before the work, not after
  LoadedModel m = load_ensemble(run, on, checkpoint);
  LineTranslator translator(m, beam, max_length);
  LineReader reader(input);
  // Reads, translates and writes batch after batch; `flush` pushes each batch out (stdout).
  auto translate_to = [&](std::FILE* out, bool flush) {
    int64_t line_no = 0;
    for (bool more = true; more;) {
      std::vector<std::string> lines;
      std::string line;
      // A batch is --batch-lines lines, or fewer when the input pauses (a pipe whose writer waits
      // for the answers): what has arrived is translated at once.
      while (static_cast<int64_t>(lines.size()) < batch_lines && (lines.empty() || reader.ready()) &&
             (more = reader.next(line))) {
        lines.push_back(line);
      }
      const auto hypotheses = translator.translate(lines, reader.name(), line_no + 1);
      for (const auto& h : hypotheses) {
        if (n_best == 0) {
          std::fprintf(out, "%s\n", translator.text(h.front()).c_str());
        } else {
          for (std::size_t k = 0; k < h.size() && static_cast<int64_t>(k) < n_best; ++k) {
            // Moses/Marian: the model's feature (F0= log P) and the total the beam ranked by.
            std::fprintf(out, "%ld ||| %s ||| F0= %.6f ||| %.6f\n", static_cast<long>(line_no),
                         translator.text(h[k]).c_str(), h[k].log_prob, h[k].score);
          }
        }
        ++line_no;
      }
      if (flush) check_stdout("translate: writing the translations");
    }
  };
  if (output.empty()) {
    translate_to(stdout, true);
  } else {
    write_file_atomically(output, [&](std::FILE* f) { translate_to(f, false); });
  }
  if (!quiet) translator.report_crops();
  return 0;
}

}  // namespace qkgrad::translate_cli
