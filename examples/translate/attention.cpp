// qkgrad-translate attention and attention-stats: the attention of one sentence drawn (SVG),
// and its statistics over a data split.
#include "commands.h"

namespace qkgrad::translate_cli {

int cmd_attention(int argc, char** argv) {
  std::string run, text, out, device = "cpu", checkpoint;
  int64_t max_length = 128;
  Args args("qkgrad-translate attention",
            "Translates --text (greedy), then draws the attention probabilities of every layer and head:\n"
            "encoder self-attention, decoder self-attention and cross-attention, one SVG grid each.");
  args.option("run", "run directory", &run, true);
  args.once(args.option("text", "the source sentence", &text, true), "one sentence at a time");
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.option("out", "output prefix (default RUNDIR/attention): writes PREFIX-encoder.svg, -decoder.svg, -cross.svg", &out);
  args.option("max-length", "the longest --text drawn, in subwords (a heatmap has length^2 cells per head)", &max_length, 1,
              1024);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate attention", device);
  if (out.empty()) out = run + "/attention";
  if (const auto folder = std::filesystem::path(out).parent_path(); !folder.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);  // a failure: check_can_write names it
  }
  for (const char* part : {"-encoder.svg", "-decoder.svg", "-cross.svg"}) check_can_write(out + part, "attention: --out " + out);
  LoadedModel m = load_trained_model(run, on, checkpoint);
  Seq2SeqTransformer& model = *m.model;
  const std::vector<int64_t> src = m.subwords->encode(normalize_spaces(text));
  QKGRAD_CHECK(!src.empty(), "attention: --text is empty");
  QKGRAD_CHECK(static_cast<int64_t>(src.size()) <= max_length, "attention: --text is ", src.size(),
               " subwords long, more than --max-length ", max_length,
               "; the heatmaps draw one sentence: give a shorter one (or raise --max-length, up to 1024)");
  const std::vector<int64_t> hyp = translate_all(model, {src}, BeamOptions{1, 0.6, 50, {}})[0];
  // One teacher-forced pass over (source, its translation) records every attention map.
  for (auto& layer : model.encoder_layers) layer->self_attn.record_probs = true;
  for (auto& layer : model.decoder_layers) layer->self_attn.record_probs = layer->cross_attn.record_probs = true;
  Pair pair{src, hyp};
  const Batch b = make_batch({pair}, {0}, on, special_ids(model.config()));
  {
    NoGradGuard no_grad;
    model.forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);
  }
  auto labels = [&](const std::vector<int64_t>& ids, bool with_bos, bool with_eos) {
    std::vector<std::string> l;
    if (with_bos) l.push_back("<s>");
    for (int64_t id : ids) l.push_back(m.subwords->piece(id));
    if (with_eos) l.push_back("</s>");
    return l;
  };
  const auto src_labels = labels(src, false, true), tgt_labels = labels(hyp, true, false);
  auto maps_of = [&](const std::string& kind, const std::vector<const MultiHeadAttention*>& modules,
                     const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
    std::vector<svg::Heatmap> maps;
    for (std::size_t l = 0; l < modules.size(); ++l) {
      const Tensor p = modules[l]->last_probs.to(Device::cpu);  // [1, H, Tq, Tk], read below
      for (int64_t h = 0; h < p.size(1); ++h) {
        svg::Heatmap map{cat(kind, " layer ", l, " head ", h), rows, cols, {}};
        for (int64_t i = 0; i < p.size(2); ++i) {
          std::vector<double> row;
          for (int64_t j = 0; j < p.size(3); ++j) row.push_back(p.at({0, h, i, j}));
          map.values.push_back(row);
        }
        maps.push_back(map);
      }
    }
    return maps;
  };
  std::vector<const MultiHeadAttention*> enc, dec, cross;
  for (auto& layer : model.encoder_layers) enc.push_back(&layer->self_attn);
  for (auto& layer : model.decoder_layers) {
    dec.push_back(&layer->self_attn);
    cross.push_back(&layer->cross_attn);
  }
  const int64_t heads = model.config().heads;
  const std::string mode = mode_title(model.config().attention);
  const int columns = static_cast<int>(heads);
  svg::write_svg(out + "-encoder.svg", svg::heatmap_grid(mode + " encoder self-attention", maps_of("encoder", enc, src_labels, src_labels),
                                                         columns, "rows and columns: source tokens"));
  svg::write_svg(out + "-decoder.svg", svg::heatmap_grid(mode + " decoder self-attention", maps_of("decoder", dec, tgt_labels, tgt_labels),
                                                         columns, "rows and columns: target tokens (causal)"));
  svg::write_svg(out + "-cross.svg", svg::heatmap_grid(mode + " cross-attention", maps_of("cross", cross, tgt_labels, src_labels),
                                                       columns, "rows = target (queries), columns = source (keys)"));
  std::printf("translation: %s\nwrote %s-encoder.svg, %s-decoder.svg, %s-cross.svg\n", m.subwords->decode(hyp).c_str(),
              out.c_str(), out.c_str(), out.c_str());
  return 0;
}

int cmd_attention_stats(int argc, char** argv) {
  std::string run, split = "test", data, out, device = "cpu", checkpoint;
  int64_t sentences = 0, batch_tokens = 2000, max_length = 1024;
  Args args("qkgrad-translate attention-stats",
            "How peaked is the attention? Runs the model teacher-forced on DATA/SPLIT (source, reference) and\n"
            "prints, per attention module, the mean entropy of the probability rows (nats and normalised\n"
            "by ln of the visible keys), the mean largest probability and the share of rows with one\n"
            "probability >= 0.9 (saturated), with the module's QKNorm gain g. Pairs longer than\n"
            "--max-length subwords on either side are skipped and counted.");
  args.option("run", "run directory", &run, true);
  args.option("split", "which split (train, dev or test)", &split);
  args.option("data", "data directory (default: the one the run was trained on)", &data);
  args.option("sentences", "use the first N pairs (0: all)", &sentences, 0, 100000000);
  args.option("batch-tokens", "padded tokens per batch", &batch_tokens, 16, 1000000);
  args.option("max-length", "skip pairs longer than this many subwords", &max_length, 1, 100000);
  args.option("out", "also write one JSON object per module to this file (JSON lines)", &out);
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate attention-stats", device);
  if (!out.empty()) check_can_write(out, "attention-stats: --out " + out);
  const SplitFiles files = split_files_of_run(run, data, split);
  const ParallelCorpus corpus = read_parallel(files.src, files.tgt, 1 << 20);
  LoadedModel m = load_trained_model(run, on, checkpoint);
  std::vector<Pair> pairs;
  int64_t skipped = 0;
  for (std::size_t i = 0; i < corpus.src.size(); ++i) {
    if (sentences > 0 && static_cast<int64_t>(pairs.size()) >= sentences) break;
    Pair p{m.subwords->encode(corpus.src[i]), m.subwords->encode(corpus.tgt[i])};
    if (static_cast<int64_t>(std::max(p.src.size(), p.tgt.size())) > max_length) {
      ++skipped;
      continue;
    }
    pairs.push_back(std::move(p));
  }
  const auto stats = attention_statistics(*m.model, pairs, batch_tokens);
  std::printf("%s %s: %zu sentence pairs (teacher-forced)%s; %s attention\n", split.c_str(), m.checkpoint.c_str(),
              pairs.size(), skipped ? cat(", ", skipped, " too long skipped").c_str() : "",
              mode_title(m.model->config().attention));
  std::printf("%-30s %10s %9s %10s %9s %9s %8s\n", "module", "rows", "entropy", "normalised", "max prob", "saturated",
              "g");
  for (const auto& s : stats) {
    std::printf("%-30s %10ld %9.3f %10.3f %9.3f %8.1f%% %8.3f\n", s.module.c_str(), static_cast<long>(s.rows),
                s.mean_entropy, s.mean_norm_entropy, s.mean_max_prob, 100 * s.saturated_fraction, s.g);
  }
  if (!out.empty()) {
    const std::string text = attention_statistics_jsonl(stats);
    write_file_atomically(out, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

}  // namespace qkgrad::translate_cli
