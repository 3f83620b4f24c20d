// qkgrad-lm generate: text from a trained model, after a prompt.
#include "commands.h"

namespace qkgrad::lm_cli {

int cmd_generate(int argc, char** argv) {
  std::string run, prompt, device = "cpu", checkpoint, stop;
  SamplingOptions o;
  int64_t seed = 1;
  Args args("qkgrad-lm generate",
            "Writes the prompt and what the model writes after it, a byte at a time (KV cache), to stdout.\n"
            "The same model, prompt, settings and --seed give the same text.");
  args.option("run", "run directory", &run, true);
  args.option("prompt", "the text to continue (default: none; the model starts a new line)", &prompt);
  args.option("max-bytes", "bytes to generate (and the rest of the last UTF-8 character, so the text stays well-formed)", &o.max_bytes, 1, 10000000);
  args.option("temperature", "softmax temperature (0: always the most likely byte)", &o.temperature, 0, 100);
  args.option("top-k", "draw from the K most likely bytes only (0: all 256)", &o.top_k, 0, 256);
  args.option("seed", "the draws' seed", &seed, 0, int64_t{1} << 62);
  args.option("stop-at", "stop once the text generated ends with this (e.g. $'\\n' for one line)", &stop);
  args.option("checkpoint", kCheckpointHelp, &checkpoint);
  args.choice("device", kDeviceHelp, &device, {"cpu", "cuda"});
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = training::parse_device("qkgrad-lm generate", device);
  QKGRAD_CHECK(is_valid_utf8(prompt), "generate: --prompt is not UTF-8 (byte ", first_invalid_utf8(prompt) + 1, ")");
  LoadedModel m = load_trained_model(run, on, checkpoint);
  o.seed = static_cast<uint64_t>(seed);
  o.context = m.settings.context;
  o.stop_at = stop;
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  generate(*m.model, prompt, o, [](std::string_view bytes) {
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    std::fflush(stdout);  // each byte as it is drawn
  });
  if (stop.empty() || stop.back() != '\n') std::fputc('\n', stdout);
  std::fflush(stdout);
  QKGRAD_CHECK(!std::ferror(stdout), "generate: writing to stdout failed");
  return 0;
}

}  // namespace qkgrad::lm_cli
