// qkgrad-translate eval: translate a data split of a run and score it (BLEU, chrF).
#include "commands.h"

namespace qkgrad::translate_cli {

int cmd_eval(int argc, char** argv) {
  std::string run, split = "test", data, tokenize, device = "cpu", checkpoint;
  BeamOptions beam;
  int64_t show = 0, max_length = 1024;
  Args args("qkgrad-translate eval", "Translates DATA/SPLIT.SRC and scores it against DATA/SPLIT.TGT (BLEU, chrF, with\n"
                                     "sacreBLEU-style signatures); writes the translations to RUNDIR/SPLIT.hyp, one line per\n"
                                     "source line (an empty source gives an empty line), so that `bleu --ref DATA/SPLIT.TGT\n"
                                     "--hyp RUNDIR/SPLIT.hyp` gives the same scores.");
  args.option("run", "run directory", &run, true);
  args.option("split", "which split: train, dev or test (DATA/SPLIT.SRC and DATA/SPLIT.TGT)", &split);
  args.option("data", "data directory (default: the one the run was trained on)", &data);
  args.once(args.option("checkpoint", kEnsembleHelp, &checkpoint), kOneList);
  SearchFlags search(args, beam);
  args.choice("tokenize", "BLEU tokenisation (default: the run's, bleu_tokenize in options.json)", &tokenize, {"13a", "none"});
  args.option("show", "print this many source / reference / translation triples", &show, 0, 1000000);
  args.option("max-length", "longer source lines are cropped to this many subwords (counted on stderr)", &max_length, 1, 100000);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  ScoreFlags flags(args);
  bool quiet = false;
  args.flag("quiet", "on stderr only errors (no note about cropped lines, no warning)", &quiet);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  search.apply();
  const Device on = parse_device("qkgrad-translate eval", device);
  const SplitFiles files = split_files_of_run(run, data, split);
  const std::string hyp_path = run + "/" + split + ".hyp";
  check_can_write(hyp_path, "eval: the translations " + hyp_path);  // before the work, not after
  const std::vector<std::string> sources = read_text_lines(files.src), refs = read_text_lines(files.tgt);
  QKGRAD_CHECK(sources.size() == refs.size(), "eval: ", files.src, " has ", sources.size(), " lines but ", files.tgt,
               " has ", refs.size(), "; they must be aligned line by line");
  LoadedModel m = load_ensemble(run, on, checkpoint);
  LineTranslator translator(m, beam, max_length);
  const std::vector<std::string> hyps = translator.translate_best(sources, files.src, 1);
  if (!quiet) translator.report_crops();
  std::string text;
  for (const auto& h : hyps) text += h + "\n";
  write_file_atomically(hyp_path, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  const ReportOptions report = flags.report(parse_bleu_tokenize(tokenize.empty() ? files.bleu_tokenize : tokenize));
  // Only the scores on stdout when a script reads them (--format json, --score-only, --sentence-level).
  std::FILE* notes = report.format == ScoreFormat::text && !report.sentence_level ? stdout : stderr;
  if (!(quiet && notes == stderr)) {
    std::fprintf(notes, "%s %s (%zu sentences, beam %ld)\n", split.c_str(), m.checkpoint.c_str(), hyps.size(),
                 static_cast<long>(beam.beam));
    std::fflush(notes);
  }
  print_scores(hyps, {refs}, "eval: " + hyp_path, {files.tgt}, report, !quiet);
  std::fflush(stdout);
  for (int64_t i = 0; i < show && i < static_cast<int64_t>(hyps.size()); ++i) {
    const std::size_t k = static_cast<std::size_t>(i * static_cast<int64_t>(hyps.size()) / std::max<int64_t>(show, 1));
    std::fprintf(notes, "\n  source:      %s\n  reference:   %s\n  translation: %s\n", sources[k].c_str(), refs[k].c_str(),
                 hyps[k].c_str());
  }
  return 0;
}

}  // namespace qkgrad::translate_cli
