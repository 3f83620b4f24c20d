// qkgrad-translate grads: one batch's loss and every gradient, for cross-checks (tools/torch_reference.py).
#include "commands.h"

namespace qkgrad::translate_cli {

int cmd_grads(int argc, char** argv) {
  std::string run, src, tgt, out, device = "cpu", checkpoint;
  int64_t max_sentences = 8;
  double smoothing = 0.1;
  Args args("qkgrad-translate grads", "Runs one batch (the first sentences of --src/--tgt) with dropout off and writes the\n"
                                      "token ids, the loss and every parameter's gradient to --out (safetensors).");
  args.option("run", "run directory", &run, true);
  args.option("src", "source sentences", &src, true);
  args.option("tgt", "target sentences", &tgt, true);
  args.option("out", "output .safetensors file", &out, true);
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.option("max-sentences", "sentences in the batch", &max_sentences, 1, 100000);
  args.option("label-smoothing", "label smoothing epsilon", &smoothing, 0, 1);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate grads", device);
  check_can_write(out, "grads: --out " + out);
  LoadedModel m = load_trained_model(run, on, checkpoint);
  const ParallelCorpus corpus = read_parallel(src, tgt, 1 << 20);
  std::vector<Pair> pairs;
  std::vector<int64_t> indices;
  for (std::size_t i = 0; i < corpus.src.size() && static_cast<int64_t>(i) < max_sentences; ++i) {
    pairs.push_back({m.subwords->encode(corpus.src[i]), m.subwords->encode(corpus.tgt[i])});
    indices.push_back(static_cast<int64_t>(i));
  }
  const Batch b = make_batch(pairs, indices, on, special_ids(m.model->config()));
  const double loss = write_gradient_dump(*m.model, b.src, b.src_lengths, b.tgt_in, b.tgt_out, b.tgt_lengths, smoothing, out);
  std::printf("wrote %s: %zu sentences, loss %.6f per target token, %zu parameter gradients\n", out.c_str(), pairs.size(),
              loss, m.model->named_parameters().size());
  return 0;
}

}  // namespace qkgrad::translate_cli
