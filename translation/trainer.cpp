#include "translation/trainer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/text.h"
#include "ops/ops.h"
#include "plots/svg.h"
#include "training/data_parallel.h"
#include "training/trainer.h"
#include "translation/batching.h"
#include "translation/beam_search.h"
#include "translation/bleu.h"
#include "translation/corpus.h"
#include "translation/settings.h"
#include "translation/subwords.h"
#include "translation/trained_model.h"
#include "training/device_flag.h"

namespace qkgrad::translation {

namespace fs = std::filesystem;
using training::BatchInfo;
using training::best_point;
using training::Evaluation;
using training::History;
using training::RunDir;
using training::TaskContext;

namespace {

// --precision bf16 needs what makes it worth having: float32 parameters and a device whose
// products are native bf16 (Backend::bf16_products_missing; said at once, never a silently slow run).
void check_precision(const RunSettings& s, Device device) {
  if (s.precision != "bf16") return;
  const std::string flag = "qkgrad-translate train: --precision bf16";
  if (s.dtype != DType::f32) throw UsageError(cat(flag, " mixes bf16 products into float32 training; --dtype is ", dtype_name(s.dtype)));
  const std::string missing = backend(device).bf16_products_missing();  // CPU: AVX512_BF16 or AMX
  if (!missing.empty()) throw UsageError(cat(flag, ": ", missing, "; use --precision f32"));
}

// Checked first, before anything is read or written: a usage error (exit 2) creates no run
// directory. Returns the device (--device cuda without CUDA support, or without a GPU, is one).
Device check_train_settings(const RunSettings& s) {
  const Device device = training::parse_device("qkgrad-translate train", s.device);
  check_settings(s, "train");  // each setting's range or choices (translation/settings.cpp)
  // The model's shape is checked now, before anything is written or trained: a bad combination
  // of sizes is a usage error, not a failure after the subwords have been trained.
  if (s.d_model % s.heads != 0) {
    const RunSettings preset = preset_settings(s.preset);
    throw UsageError(cat("qkgrad-translate train: the model width (--d-model, ", s.d_model,
                         ") must be divisible by the number of heads (--heads, ", s.heads, "); preset ", s.preset,
                         " has d-model ", preset.d_model, " and ", preset.heads, " heads"));
  }
  const TransformerConfig c = model_config(s, std::max<int64_t>(s.vocab_size, 8), "", 2);
  try {
    c.validate();
  } catch (const Error& e) {
    throw UsageError(cat("qkgrad-translate train: these sizes do not make a model: ", e.what()));
  }
  check_precision(s, device);
  return device;
}

std::string split_file(const std::string& dir, const char* split, const std::string& lang) {
  return corpus_path(dir, split, lang);  // DIR/SPLIT.LANG, or its .gz
}

struct EncodedData {
  std::vector<Pair> train, dev;
  std::vector<std::string> dev_references;  // raw target text, for BLEU
  int64_t dropped_long = 0;
};

std::vector<Pair> encode_pairs(const Subwords& sw, const ParallelCorpus& c, int64_t max_length, int64_t* dropped) {
  std::vector<Pair> out;
  for (std::size_t i = 0; i < c.src.size(); ++i) {
    Pair p{sw.encode(c.src[i]), sw.encode(c.tgt[i])};
    if (max_length > 0 && (static_cast<int64_t>(p.src.size()) > max_length || static_cast<int64_t>(p.tgt.size()) > max_length)) {
      if (dropped) ++*dropped;
      continue;
    }
    out.push_back(std::move(p));
  }
  return out;
}

// Dev loss (teacher-forced, per target token), BLEU (with its brevity penalty and the length ratio
// hypothesis / reference, to follow how short the translations are over training) and chrF.
Evaluation evaluate(Seq2SeqTransformer& model, const EncodedData& data, const Subwords& sw, const RunSettings& r,
                    const std::function<void(double, const std::string&)>& shown) {
  model.eval();
  double loss = 0;
  {  // teacher-forced loss per target token over the whole dev set
    NoGradGuard no_grad;
    BatchPlan plan(data.dev, r.batch_tokens);
    double total = 0;
    int64_t tokens = 0;
    for (int64_t i = 0; i < plan.batches_per_epoch(); ++i) {
      shown(0.0, cat("dev loss: batch ", i + 1, "/", plan.batches_per_epoch()));
      const Batch b = make_batch(data.dev, plan.group(i), model.device(), special_ids(model.config()));
      const LossSum l = cross_entropy(model.forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths), b.tgt_out, 0.0,
                                      model.config().pad_id);
      total += l.sum.item();
      tokens += l.tokens;
    }
    loss = total / static_cast<double>(std::max<int64_t>(tokens, 1));
  }
  const std::size_t n = r.eval_sentences > 0 ? std::min<std::size_t>(static_cast<std::size_t>(r.eval_sentences), data.dev.size())
                                               : data.dev.size();
  std::vector<std::vector<int64_t>> sources;
  std::vector<std::string> refs(data.dev_references.begin(), data.dev_references.begin() + static_cast<std::ptrdiff_t>(n));
  for (std::size_t i = 0; i < n; ++i) sources.push_back(data.dev[i].src);
  const auto hyps_ids = translate_all(model, sources, BeamOptions{r.beam, r.alpha, 50, {}}, 2000, [&](std::size_t done) {
    shown(static_cast<double>(done) / static_cast<double>(n), cat("dev BLEU: translated ", done, "/", n, " sentences"));
  });
  std::vector<std::string> hyps;
  for (const auto& h : hyps_ids) hyps.push_back(sw.decode(h));
  const BleuScore bleu = corpus_bleu(hyps, refs, r.bleu_tokenize == "none" ? BleuTokenize::none : BleuTokenize::t13a);
  const double chrf = corpus_chrf(hyps, refs);
  model.train();
  Evaluation e;
  e.values["loss"] = loss;
  e.values["bleu"] = bleu.score;
  e.values["brevity_penalty"] = bleu.brevity_penalty;
  e.values["length_ratio"] = bleu.ratio;
  e.values["chrf"] = chrf;
  e.line = cat("dev loss ", format_number("%.3f", loss), ", ", bleu.format(), ", chrF ", format_number("%.1f", chrf));
  return e;
}

// "encoder.layers.0.self_attn.g" -> "encoder 0 self": legend names short enough to read whole.
std::string gain_series_name(const std::string& parameter) {
  std::vector<std::string> words;
  std::size_t start = 0;
  while (start <= parameter.size()) {
    const std::size_t end = std::min(parameter.find('.', start), parameter.size());
    std::string part = parameter.substr(start, end - start);
    if (part.size() > 5 && part.compare(part.size() - 5, 5, "_attn") == 0) part.resize(part.size() - 5);
    if (part != "layers" && part != "g" && part != "gamma" && !part.empty()) words.push_back(part);
    start = end + 1;
  }
  return join(words, " ");
}

// curves.svg: train and dev loss on one panel (to see overfitting), dev BLEU and chrF with the
// point checkpoints/best was saved at, the learning rate, and the attention modules' learned
// gains (QKNorm's g, or the mean of each q_norm/k_norm γ; none for scaled dot-product).
void write_curves(const RunDir& run, const History& h, const std::string& title, const std::string& best_metric) {
  std::vector<svg::Panel> panels;
  svg::Panel loss{"loss per target token (dev without label smoothing)", "step", "loss",
                  {{"train (label-smoothed)", h.series("train_loss")}, {"dev", h.series("dev_loss")}}};
  svg::Panel scores{"dev BLEU and chrF", "step", "score", {{"BLEU", h.series("dev_bleu")}, {"chrF", h.series("dev_chrf")}}};
  if (const auto best = best_point(h.series("dev_" + best_metric), best_metric == "loss")) {
    const std::string label = cat("checkpoints/best (step ", static_cast<int64_t>(best->first), ")");
    (best_metric == "loss" ? loss : scores).series.push_back({label, {*best}});
  }
  panels.push_back(loss);
  panels.push_back(scores);
  panels.push_back({"learning rate", "step", "lr", {{"lr", h.series("lr", "train_loss")}}});
  if (const auto gains = h.object_series("g"); !gains.empty()) {
    const std::string& first = gains.begin()->first;  // "...self_attn.g" or "...self_attn.q_norm.gamma"
    const bool qknorm = first.size() >= 2 && first.substr(first.size() - 2) == ".g";
    svg::Panel panel{qknorm ? "QKNorm gain g of each attention module" : "QK-norm gains: mean of each γ over its dimensions",
                     "step", qknorm ? "g" : "mean γ", {}};
    for (const auto& [name, points] : gains) panel.series.push_back({gain_series_name(name), points});
    panels.push_back(panel);
  }
  svg::write_svg(run.curves(), svg::line_charts(title, panels, 2));
}

// --best-metric: which dev value picks checkpoints/best and counts patience (and drives the
// plateau schedule): BLEU (the paper's), chrF, or the dev loss (lower is better).
training::LoopSettings loop_settings(const RunSettings& s) {
  training::LoopSettings l = training::shared_loop_settings(s);
  l.best_metric = s.best_metric;
  l.best_metric_label = s.best_metric == "bleu" ? "BLEU" : s.best_metric == "chrf" ? "chrF" : "loss";
  l.lower_is_better = s.best_metric == "loss";
  return l;
}

// The translation task of the training harness (training/trainer.h): a parallel corpus, a joint
// SentencePiece model in the run directory, the encoder-decoder Transformer, label-smoothed
// cross-entropy, and dev loss, BLEU and chrF.
class TranslationTask : public training::Task {
 public:
  TranslationTask(const RunSettings& settings, Device device) : settings_(settings), device_(device) {}

  // ---- the run directory ----
  std::vector<std::string> files() const override { return subword_files(); }
  Json settings_json() const override { return to_json(settings_); }
  Json saved_settings(const std::string& options_path) const override { return to_json(load_run_settings(options_path)); }
  bool fixed_on_resume(const std::string& key) const override { return translation::fixed_on_resume(key); }
  // The subwords of an earlier attempt are kept when they were trained for the same data,
  // languages, vocabulary size, subword model and seed (subwords without an options.json were put
  // there by hand, and are used).
  std::string remove_attempt_leftovers(const RunDir& run, const Json& now) override {
    std::error_code ec;
    bool same_subwords = false;
    try {
      const Json saved = parse_json(read_file(run.options(), 1 << 20), run.options());
      same_subwords = saved.is_object();
      for (const char* key : {"data", "src", "tgt", "vocab_size", "subword_model", "seed"}) {
        same_subwords = same_subwords && saved.contains(key) && saved.at(key) == now.at(key);
      }
    } catch (const Error&) {
      same_subwords = false;  // a damaged options.json: start over completely
    }
    fs::remove_all(run.file("subword_training.txt"), ec);
    if (same_subwords) return " (keeping its subwords, trained with the same options)";
    fs::remove(subwords_file(run), ec);
    fs::remove(run.file("subwords.vocab"), ec);
    return "";
  }

  // ---- the data: the corpus (read and checked before anything is written), the subwords ----
  void read_data(TaskContext& c) override {
    train_text_ = read_parallel(split_file(settings_.data, "train", settings_.src), split_file(settings_.data, "train", settings_.tgt));
    dev_text_ = read_parallel(split_file(settings_.data, "dev", settings_.src), split_file(settings_.data, "dev", settings_.tgt));
    c.progress.message(cat("data: train ", train_text_.summary(), "; dev ", dev_text_.summary()));
    c.check_signal("reading the corpus");
  }
  // The corpus every rank read, compared across the ranks before anything is written.
  Json data_fingerprint() const override {
    using training::fingerprint;
    return Json{{"train pairs", train_text_.src.size()},
                {"train text", hex64(fingerprint(train_text_.tgt, fingerprint(train_text_.src)))},
                {"dev pairs", dev_text_.src.size()},
                {"dev text", hex64(fingerprint(dev_text_.tgt, fingerprint(dev_text_.src)))}};
  }
  void make_files(TaskContext& c) override {
    if (!fs::exists(subwords_file(c.run))) train_subwords(c);
  }
  void prepare_data(TaskContext& c) override {
    subwords_ = std::make_unique<Subwords>(subwords_file(c.run));
    encode_data(c);
    c.check_signal("encoding the corpus");
  }

  // ---- the model ----
  Module& build_model(TaskContext& c) override {
    config_ = model_config(settings_, subwords_->vocab_size(), vocabulary_id(c), L_);
    model_ = std::make_unique<Seq2SeqTransformer>(config_, device_);
    plan_ = std::make_unique<BatchPlan>(data_.train, settings_.batch_tokens, batch_sort_named(settings_.batch_sort));
    return *model_;
  }
  std::string describe_model() const override {
    return cat("model: ", model_->parameter_count(), " parameters, ", config_.encoder_layers, "+", config_.decoder_layers,
               " layers, d ", config_.d_model, ", ", config_.heads, " heads, ffn ", config_.ffn, ", ", attention_mode_name(settings_.attention),
               " attention, on ", device_summary(model_->device()),
               settings_.precision == "bf16" ? " (mixed precision: bf16 products in the linear layers)" : "");
  }
  std::string describe_batches() const override {
    const PaddingFill f = padding_fill(*plan_, data_.train);
    const auto percent = [](int64_t part, int64_t whole) {
      return format_number("%.0f", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
    };
    return cat(plan_->batches_per_epoch(), " batches of <= ", settings_.batch_tokens, " tokens per epoch, sorted by the ",
               settings_.batch_sort, " side (real tokens: ",
               percent(f.src_real, f.src_padded), "% of the padded source, ", percent(f.tgt_real, f.tgt_padded), "% of the target)");
  }
  std::string describe_evaluation() const override {
    const std::size_t dev = data_.dev.size();
    const auto scored = settings_.eval_sentences > 0 ? std::min<std::size_t>(dev, static_cast<std::size_t>(settings_.eval_sentences)) : dev;
    return cat("dev loss on all ", dev, " dev pairs, BLEU and chrF (beam ", settings_.beam, ") on ",
               scored == dev ? cat("all of them") : cat("the first ", scored, " (--eval-sentences; 0: all)"));
  }
  Generator& dropout_generator() override { return model_->dropout_generator(); }
  void save_checkpoint(const std::string& dir, const TrainerState* trainer) override {
    qkgrad::save_checkpoint(dir, *model_, trainer);
  }
  void load_weights(const std::string& dir) override { load_model_weights(dir, *model_); }

  // ---- the batches and the loss ----
  int64_t batches_per_epoch() const override { return plan_->batches_per_epoch(); }
  std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch) const override { return plan_->epoch_order(seed, epoch); }
  BatchInfo select_batch(int64_t group) override {
    batch_ = make_batch(data_.train, plan_->group(group), device_, special_ids(config_));
    return BatchInfo{batch_.indices, batch_.tgt_tokens, batch_.src_tokens + batch_.tgt_tokens};
  }
  Tensor loss_sum() override { return loss_sum_of(batch_); }
  Tensor loss_sum(const std::vector<int64_t>& share) override {
    return loss_sum_of(make_batch(data_.train, share, device_, special_ids(config_)));
  }
  std::string describe_batch(const std::vector<int64_t>& indices) const override {
    return cat(indices.size(), " sentence pairs starting with training pair ", indices.front());
  }

  // ---- evaluation and the record ----
  Evaluation evaluate(const std::function<void(double, const std::string&)>& shown) override {
    return translation::evaluate(*model_, data_, *subwords_, settings_, shown);
  }
  Json log_extras() const override {
    Json g = Json::object();
    for (const auto& [name, t] : model_->attention_gains()) g[name] = t.numel() == 1 ? t.item() : mean(t).item();
    return Json{{"g", g}};
  }
  void write_curves(const RunDir& run, const History& history) const override {
    translation::write_curves(run, history, cat("qkgrad ", attention_mode_name(settings_.attention), " ", settings_.src, "→", settings_.tgt, " (",
                                                settings_.preset, ")"),
                              settings_.best_metric);
  }

 private:
  // The label-smoothed cross-entropy summed over the batch's target tokens.
  Tensor loss_sum_of(const Batch& b) {
    const Tensor logits = model_->forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);  // [B, T, V]
    return cross_entropy(logits, b.tgt_out, settings_.label_smoothing, config_.pad_id).sum;
  }

  // A joint SentencePiece model on whitespace-normalised copies of both sides, so that the
  // subwords see exactly what the model will.
  void train_subwords(TaskContext& c) {
    c.progress.message(cat("training a joint SentencePiece ", settings_.subword_model, " model (", settings_.vocab_size, " pieces) on ",
                           split_file(settings_.data, "train", settings_.src), " and ",
                           split_file(settings_.data, "train", settings_.tgt)));
    const std::string joint = c.run.file("subword_training.txt");
    write_file_atomically(joint, [&](std::FILE* f) {
      for (const auto* side : {&train_text_.src, &train_text_.tgt}) {
        for (const auto& line : *side) std::fprintf(f, "%s\n", line.c_str());
      }
    });
    try {
      Subwords::train({{joint}, subwords_file(c.run), static_cast<int>(settings_.vocab_size),
                       static_cast<uint64_t>(settings_.seed), settings_.subword_model});
    } catch (...) {
      fs::remove(joint);
      throw;
    }
    fs::remove(joint);
  }

  // Subword ids of every pair, and L, the 97.5th percentile of the training lengths (QKNorm's g0).
  void encode_data(TaskContext& c) {
    data_.train = encode_pairs(*subwords_, train_text_, settings_.max_length, &data_.dropped_long);
    data_.dev = encode_pairs(*subwords_, dev_text_, 0, nullptr);
    data_.dev_references = dev_text_.tgt;
    QKGRAD_CHECK(!data_.train.empty(), "train: every training pair is longer than --max-length ", settings_.max_length);
    std::vector<int64_t> lengths;
    for (const Pair& p : data_.train) {
      lengths.push_back(static_cast<int64_t>(p.src.size()));
      lengths.push_back(static_cast<int64_t>(p.tgt.size()));
    }
    L_ = percentile(lengths, 97.5);
    c.progress.message(cat("subwords: ", subwords_->vocab_size(), " pieces; ", data_.train.size(), " training pairs (",
                           data_.dropped_long, " longer than ", settings_.max_length,
                           " dropped); L = 97.5th percentile of lengths = ", L_,
                           " -> QKNorm g0 = log2(L^2 - L) = ", format_number("%.2f", qknorm_initial_g(std::max(L_, 2.0)))));
  }

  // The vocabulary's name in this run's checkpoints: a resumed run keeps the one its checkpoints
  // already record (runs from before 2026-12-04 name it by the file's bytes; the same pieces,
  // either way), a new run the content fingerprint (translation/subwords.h).
  std::string vocabulary_id(const TaskContext& c) const {
    if (c.resume && checkpoint_exists(c.run.last())) {
      try {
        const std::string recorded = load_checkpoint_config(c.run.last()).vocabulary_id;
        if (subwords_->identifies(recorded)) return recorded;
      } catch (const Error&) {
        // The harness's resume reports a damaged checkpoint, naming the file and what to do.
      }
    }
    return subwords_->fingerprint();
  }

  const RunSettings& settings_;
  const Device device_;
  ParallelCorpus train_text_, dev_text_;
  std::unique_ptr<Subwords> subwords_;
  EncodedData data_;
  double L_ = 2;
  TransformerConfig config_;
  std::unique_ptr<Seq2SeqTransformer> model_;
  std::unique_ptr<BatchPlan> plan_;
  Batch batch_;
};

}  // namespace

int train(const TrainOptions& options) {
  const std::unique_ptr<distributed::Communicator> one = distributed::single_process();
  return train(options, *one);
}

int train(const TrainOptions& options, distributed::Communicator& comm) {
  const Device device = check_train_settings(options.settings);
  if (options.threads > 0) {
    set_num_threads(static_cast<int>(options.threads));
  } else if (comm.size() > 1) {
    set_num_threads(training::threads_per_rank(distributed::launched_local_ranks()));  // not every rank on every core
  }
  TranslationTask task(options.settings, device);
  const training::LoopSettings loop = loop_settings(options.settings);
  const training::LoopOptions run{options.run_dir, options.resume, options.on_nan, options.inject_nan_at_step,
                                  options.inject_rank_death_at_step};
  return training::train(task, loop, run, comm);
}

}  // namespace qkgrad::translation
