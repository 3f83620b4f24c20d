// qkgrad-lm eval: a trained model's loss, perplexity and bits per byte on a text.
#include "commands.h"

namespace qkgrad::lm_cli {

int cmd_eval(int argc, char** argv) {
  std::string run, split = "test", text_path, device = "cpu", checkpoint;
  int64_t batch_size = 16;
  bool json = false;
  Args args("qkgrad-lm eval", "The model's loss per byte, perplexity and bits per byte on DATA/SPLIT.txt (DATA: the run's)\n"
                              "or on any UTF-8 text file (--text), every byte after the first predicted once, in windows of\n"
                              "the run's context.");
  args.option("run", "run directory", &run, true);
  args.option("split", "which split of the run's data: train, valid or test (DATA/SPLIT.txt)", &split);
  args.option("text", "a text file to score instead of a split", &text_path);
  args.option("checkpoint", kCheckpointHelp, &checkpoint);
  args.option("batch-size", "windows per batch", &batch_size, 1, 100000);
  args.choice("device", kDeviceHelp, &device, {"cpu", "cuda"});
  args.flag("json", "print one JSON object instead of the text", &json);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = training::parse_device("qkgrad-lm eval", device);
  if (text_path.empty() && split != "train" && split != "valid" && split != "test") {
    throw UsageError(cat("qkgrad-lm eval: --split must be train, valid or test, got '", split, "' (or give --text FILE)"));
  }
  LoadedModel m = load_trained_model(run, on, checkpoint);
  const std::string path = text_path.empty() ? split_path(m.settings.data, split + ".txt") : text_path;
  const std::string text = read_text_file(path, text_path.empty() ? "the " + split + " split" : "--text");
  QKGRAD_CHECK(text.size() >= 2, path, " has one byte: nothing to predict");
  const Windows windows(text, m.settings.context);
  const TextScore score = score_text(*m.model, windows, spread_windows(windows.count(), 0), batch_size);
  if (json) {
    const Json j{{"text", path}, {"checkpoint", m.checkpoint}, {"bytes", score.bytes}, {"loss", score.loss()},
                 {"perplexity", score.perplexity()}, {"bits_per_byte", score.bits_per_byte()}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s (%s): %s\n", path.c_str(), m.checkpoint.c_str(), score.line().c_str());
  }
  return 0;
}

}  // namespace qkgrad::lm_cli
