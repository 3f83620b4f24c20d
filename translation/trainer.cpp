#include "translation/trainer.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <ctime>
#include <cmath>
#include <cstring>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "distributed/gradient_reducer.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/text.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "ops/ops.h"
#include "plots/svg.h"
#include "ops/precision.h"
#include "translation/averaging.h"
#include "translation/batching.h"
#include "translation/beam_search.h"
#include "translation/bleu.h"
#include "translation/corpus.h"
#include "training/data_parallel.h"
#include "training/metrics.h"
#include "training/progress.h"
#include "training/run_dir.h"
#include "training/stop_signals.h"
#include "translation/settings.h"
#include "translation/subwords.h"
#include "translation/trained_model.h"
#include "translation/usage.h"

namespace qkgrad::translation {

namespace fs = std::filesystem;
using namespace training;  // the harness: run directory, lock, signals, metrics, progress, ranks

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string clock_text(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", static_cast<long>(s / 3600), static_cast<long>((s / 60) % 60),
                static_cast<long>(s % 60));
  return buf;
}


// --precision bf16 needs what makes it worth having: float32 parameters and a device whose
// products are native bf16 (Backend::bf16_products_missing; said at once, never a silently slow run).
void check_precision(const RunSettings& s, Device device) {
  if (s.precision != "bf16") return;
  const std::string flag = "qkgrad-translate train: --precision bf16";
  if (s.dtype != "f32") throw UsageError(cat(flag, " mixes bf16 products into float32 training; --dtype is ", s.dtype));
  const std::string missing = backend(device).bf16_products_missing();  // CPU: AVX512_BF16 or AMX
  if (!missing.empty()) throw UsageError(cat(flag, ": ", missing, "; use --precision f32"));
}

// Checked first, before anything is read or written: a usage error (exit 2) creates no run
// directory. Returns the device (--device cuda without CUDA support, or without a GPU, is one).
Device check_train_settings(const RunSettings& s) {
  const Device device = parse_device("qkgrad-translate train", s.device);
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

struct Evaluation {
  double loss = 0, bleu = 0, chrf = 0;
  std::string bleu_line;
};

// `shown(fraction, what)` is told how far the evaluation is (the live line moves meanwhile).
Evaluation evaluate(Seq2SeqTransformer& model, const EncodedData& data, const Subwords& sw, const RunSettings& r,
                    const std::function<void(double, const std::string&)>& shown) {
  model.eval();
  Evaluation e;
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
    e.loss = total / static_cast<double>(std::max<int64_t>(tokens, 1));
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
  e.bleu = bleu.score;
  e.bleu_line = bleu.format();
  e.chrf = corpus_chrf(hyps, refs);
  model.train();
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

// The trainer state of a checkpoint: optimizer moments plus every counter of the loop.
struct LoopState {
  int64_t step = 0, epoch = 0, position = 0;  // the next batch is epoch_order(epoch)[position]
  double best = -1;  // the best dev value of --best-metric so far (BLEU, chrF or loss); -1: none yet
  int64_t evals_since_best = 0;
  double tokens_seen = 0;
  int64_t skipped_batches = 0;  // batches skipped by the NaN guard (--on-nan skip)
  // The training loss summed since the last metrics line, and its steps: saved so that a
  // resumed run logs the same train_loss as an uninterrupted one.
  double window_loss = 0;
  int64_t window_steps = 0;
  double train_seconds = 0;  // training time over all processes of the run (the --max-minutes budget)
};

std::unique_ptr<LrSchedule> make_schedule(const RunSettings& p) {
  if (p.schedule == "cosine") return std::make_unique<CosineLr>(p.lr, p.warmup, std::max(p.max_steps, p.warmup + 1), 0.0);
  if (p.schedule == "inverse_sqrt") return std::make_unique<InverseSqrtLr>(p.lr, std::max<int64_t>(p.warmup, 1));
  return std::make_unique<PlateauLr>(p.lr, p.warmup, 0.8, 3);  // the paper: x0.8 after 3 evaluations without a better BLEU
}

TrainerState to_trainer_state(const LoopState& s, const Optimizer& opt, const LrSchedule& schedule,
                              Seq2SeqTransformer& model) {
  TrainerState t;
  t.optimizer_state = opt.state_tensors();
  t.set_int("step", s.step);
  t.set_int("optimizer_steps", opt.steps());
  t.set_int("epoch", s.epoch);
  t.set_int("position", s.position);
  t.set_double("best_value", s.best);
  t.set_int("evals_since_best", s.evals_since_best);
  t.set_double("tokens_seen", s.tokens_seen);
  t.set_int("skipped_batches", s.skipped_batches);
  t.set_double("window_loss", s.window_loss);
  t.set_int("window_steps", s.window_steps);
  t.set_double("train_seconds", s.train_seconds);
  t.set_int("dropout_rng_offset", static_cast<int64_t>(model.dropout_generator().offset()));
  for (const auto& [key, value] : schedule.state()) t.set_double("schedule." + key, value);
  return t;
}

// A counter of the trainer state, checked: a damaged or edited checkpoint (step -100, a NaN
// best BLEU) is refused, naming the key, instead of being trained on.
int64_t get_count(const TrainerState& t, const std::string& key, int64_t most = std::numeric_limits<int64_t>::max()) {
  const int64_t v = t.get_int(key);
  QKGRAD_CHECK(v >= 0 && v <= most, "trainer state: '", key, "' is ", v, "; it must be between 0 and ", most);
  return v;
}
double get_finite(const TrainerState& t, const std::string& key, double least, double most) {
  const double v = t.get_double(key);
  QKGRAD_CHECK(std::isfinite(v) && v >= least && v <= most, "trainer state: '", key, "' is ", v,
               "; it must be a finite number between ", least, " and ", most);
  return v;
}

LoopState from_trainer_state(const TrainerState& t, Optimizer& opt, LrSchedule& schedule, Seq2SeqTransformer& model,
                             int64_t batches_per_epoch) {
  constexpr double kHuge = 1e300;
  LoopState s;
  s.step = get_count(t, "step");
  s.epoch = get_count(t, "epoch");
  s.position = get_count(t, "position", batches_per_epoch);
  // -1: no evaluation yet. Checkpoints of older versions (whose best was always BLEU) say best_bleu.
  s.best = t.values.count("best_value") ? get_finite(t, "best_value", -1, kHuge) : get_finite(t, "best_bleu", -1, 100);
  s.evals_since_best = get_count(t, "evals_since_best", s.step);
  s.tokens_seen = get_finite(t, "tokens_seen", 0, kHuge);
  s.skipped_batches = get_count(t, "skipped_batches");
  if (t.values.count("window_steps")) {  // absent in checkpoints of older versions
    s.window_loss = get_finite(t, "window_loss", -kHuge, kHuge);
    s.window_steps = get_count(t, "window_steps", s.step);
  }
  if (t.values.count("train_seconds")) s.train_seconds = get_finite(t, "train_seconds", 0, kHuge);
  opt.load_state(t.optimizer_state, get_count(t, "optimizer_steps", s.step));
  model.dropout_generator().set_offset(static_cast<uint64_t>(get_count(t, "dropout_rng_offset")));
  std::map<std::string, double> sched;
  for (const auto& [key, value] : t.values) {
    if (key.rfind("schedule.", 0) == 0) sched[key.substr(9)] = get_finite(t, key, -kHuge, kHuge);
  }
  schedule.load_state(sched);
  return s;
}

// A new run into a directory that holds an earlier attempt which never saved checkpoints/last
// (it was killed, or failed): its metrics, curves and best checkpoint belong to that attempt,
// and so do its subwords if they were trained for other data or another vocabulary size.
// (Subwords without an options.json were put there by hand, and are used.)
void remove_attempt_leftovers(const RunDir& run, const Json& now, Progress& progress) {
  if (!fs::exists(run.options())) return;
  std::error_code ec;
  bool same_subwords = false;
  try {
    const Json saved = parse_json(read_file(run.options(), 1 << 20), run.options());
    same_subwords = saved.is_object();
    for (const char* key : {"data", "src", "tgt", "vocab_size", "seed"}) {
      same_subwords = same_subwords && saved.contains(key) && saved.at(key) == now.at(key);
    }
  } catch (const Error&) {
    same_subwords = false;  // a damaged options.json: start over completely
  }
  for (const std::string& f : {run.metrics(), run.curves(), run.best(), run.root + "/subword_training.txt"}) {
    fs::remove_all(f, ec);
  }
  if (!same_subwords) {
    fs::remove(subwords_file(run), ec);
    fs::remove(run.root + "/subwords.vocab", ec);
  }
  progress.message(cat(run.root, " holds an earlier attempt that never saved a checkpoint; starting over",
                       same_subwords ? " (keeping its subwords, trained with the same options)" : ""));
}

}  // namespace


namespace {

// On --resume: what defines the model, the data and their order must match options.json; the
// recipe (learning rate, warmup, schedule, dropout, label smoothing, budgets) may change, e.g. to
// get past a NaN with a lower learning rate (the continuation is then no longer bit-identical to
// an uninterrupted run with the old recipe, of course). So may the device: checkpoints do not
// depend on it (a run started on a GPU can continue on the CPU and vice versa).
void check_resumed_options(const RunDir& run, const Json& now) {
  const Json saved = parse_json(read_file(run.options(), 1 << 20), run.options());
  QKGRAD_CHECK(saved.is_object(), run.options(), ": must be a JSON object; it is damaged (train into a new --run)");
  for (const auto& [key, value] : now.items()) {
    if (!fixed_on_resume(key)) continue;
    bool same = saved.contains(key) && saved.at(key) == value;
    if (!same && key == "data" && saved.contains(key) && saved.at(key).is_string()) {
      // Older runs stored the path as given (relative): the same directory under another name.
      std::error_code ec;
      same = fs::equivalent(saved.at(key).get<std::string>(), value.get<std::string>(), ec) && !ec;
    }
    QKGRAD_CHECK(same, "train --resume: ", run.options(), " says ", key, " = ",
                 saved.contains(key) ? saved.at(key).dump() : "(missing)", " but now it is ", value.dump(),
                 "; resume with the same options, or train into a new --run");
  }
}

// --best-metric: which dev value picks checkpoints/best and counts patience (and drives the
// plateau schedule): BLEU (the paper's), chrF, or the dev loss (lower is better).
std::string metric_name(const RunSettings& p) { return p.best_metric == "bleu" ? "BLEU" : p.best_metric == "chrf" ? "chrF" : "loss"; }
double metric_value(const Evaluation& e, const RunSettings& p) {
  return p.best_metric == "bleu" ? e.bleu : p.best_metric == "chrf" ? e.chrf : e.loss;
}
bool improves(double value, double best, const RunSettings& p) {
  if (best < 0) return true;  // the first evaluation
  return p.best_metric == "loss" ? value < best : value > best;
}
std::string best_text(const LoopState& s, const RunSettings& p) {
  if (s.best < 0) return cat("no dev ", metric_name(p), " yet");
  return cat("best dev ", metric_name(p), " ", fmt(p.best_metric == "loss" ? "%.3f" : "%.2f", s.best));
}

// Why a resumed run has nothing left to do under the current budgets, or "" if it has.
std::string finished_because(const LoopState& s, const RunSettings& p) {
  if (s.step >= p.max_steps) return cat("it reached the step budget (--max-steps ", p.max_steps, ")");
  if (s.evals_since_best >= p.patience) {
    return cat("of patience (", s.evals_since_best, " evaluations without a better dev ", metric_name(p), "; --patience ",
               p.patience, ")");
  }
  if (p.max_minutes > 0 && s.train_seconds >= p.max_minutes * 60) {
    return cat("it used its time budget (", fmt("%.1f", s.train_seconds / 60), " of --max-minutes ", p.max_minutes, ")");
  }
  return "";
}

// The name of the first parameter (or its gradient) holding a NaN or ±inf, or "". `params` is
// the model's parameters() (the training run keeps that list): one pass over all of them covers
// the common, finite case; only then are the names looked up, one tensor at a time.
std::string first_non_finite(const Seq2SeqTransformer& model, const std::vector<Tensor>& params, bool gradients) {
  std::vector<Tensor> all;
  for (const Tensor& p : params) {
    const Tensor t = gradients ? p.grad() : p;
    if (t.defined()) all.push_back(t);
  }
  if (std::isfinite(sum_of_squares(all))) return "";
  for (const auto& [name, p] : model.named_parameters()) {
    const Tensor t = gradients ? p.grad() : Tensor(p);
    if (t.defined() && !std::isfinite(sum_of_squares({t}))) return name;
  }
  return "(several)";  // finite one by one, but their squares overflow together
}

// One training run, phase by phase. train() at the end of this file reads top to bottom:
// prepare the run directory, load the data, build the model (or resume it), then step, log,
// evaluate and save until a budget, patience or a signal stops it.
class TrainingRun {
 public:
  TrainingRun(const TrainOptions& options, Device device, distributed::Communicator& comm)
      : o_(options), settings_(options.settings), device_(device), run_{options.run_dir}, comm_(comm),
        ranks_(comm.size()), progress_(comm.is_root(), comm.size() == 1) {}

  // ---- phase 1: the run directory, locked (one process per run), new or resumed ----
  // In a data-parallel job rank 0 alone writes into the run directory (and holds its lock).
  void prepare_run_directory() {
    if (!comm_.is_root()) return;
    if (o_.resume) {
      QKGRAD_CHECK(checkpoint_exists(run_.last()), "train --resume: ", run_.last(),
                   " does not exist; nothing to resume (drop --resume to start)");
      lock_.emplace(run_);
      if (const std::string removed = remove_dead_trainers_leftovers(run_); !removed.empty()) {
        progress_.message(cat("removed what a training process killed while saving left in ", run_.checkpoints(), ": ",
                              removed));
      }
      check_resumed_options(run_, to_json(settings_));
      store_resume_changes();
      return;
    }
    // A lock file already there: another process may be training this run right now. Ask the
    // lock first, so that a second process is told about the first one, not about the files the
    // first one is writing (its subword temporaries, say).
    std::error_code exists_ec;
    if (fs::exists(run_.lock(), exists_ec)) lock_.emplace(run_);
    refuse_foreign_directory(run_, subword_files());
    cleanup_.emplace(run_, subword_files());  // notes what exists before anything is created
    std::error_code ec;
    fs::create_directories(run_.root, ec);
    QKGRAD_CHECK(fs::is_directory(run_.root), "train: cannot create the run directory ", run_.root, ": ",
                 ec ? ec.message() : "not a directory", "; choose a --run where you may create directories");
    try {
      if (!lock_) lock_.emplace(run_);  // refuses at once while another process trains this run (which it must not clean up)
    } catch (const RunInUse&) {
      throw;
    } catch (...) {
      cleanup_->arm();  // no lock file could be made: remove the directories made above
      throw;
    }
    if (checkpoint_exists(run_.last())) {
      fail(cat("train: ", o_.run_dir,
               " already holds a trained run; use --resume to continue it, or choose another --run (nothing was overwritten)"));
    }
    cleanup_->arm();  // from here on, a failure before the first checkpoint leaves nothing behind
  }

  // ---- phase 2: the corpus (read and checked before anything is written), the subwords ----
  void load_data() {
    train_text_ = read_parallel(split_file(settings_.data_dir, "train", settings_.src), split_file(settings_.data_dir, "train", settings_.tgt));
    dev_text_ = read_parallel(split_file(settings_.data_dir, "dev", settings_.src), split_file(settings_.data_dir, "dev", settings_.tgt));
    progress_.message(cat("data: train ", train_text_.summary(), "; dev ", dev_text_.summary()));
    check_signal("reading the corpus");
    require_same_as_root(comm_, data_fingerprint(), "data");
    if (comm_.is_root()) {
      if (!o_.resume) write_new_run_files();
      if (!fs::exists(subwords_file(run_))) train_subwords();
    }
    comm_.barrier();  // the other ranks read the subword model rank 0 wrote (a shared run directory)
    subwords_ = std::make_unique<Subwords>(subwords_file(run_));
    encode_data();
    check_signal("encoding the corpus");
  }

  // The vocabulary's name in this run's checkpoints: a resumed run keeps the one its checkpoints
  // already record (runs from before 2026-12-04 name it by the file's bytes; the same pieces,
  // either way), a new run the content fingerprint (translation/subwords.h).
  std::string vocabulary_id() const {
    if (o_.resume && checkpoint_exists(run_.last())) {
      try {
        const std::string recorded = load_checkpoint_config(run_.last()).vocabulary_id;
        if (subwords_->identifies(recorded)) return recorded;
      } catch (const Error&) {
        // resume_state() reports a damaged checkpoint, naming the file and what to do.
      }
    }
    return subwords_->fingerprint();
  }

  // ---- phase 3: the model, its optimizer and schedule; on --resume, their saved state ----
  // Returns false when a resumed run is already finished (it says so).
  bool build_model() {
    config_ = model_config(settings_, subwords_->vocab_size(), vocabulary_id(), L_);
    model_ = std::make_unique<Seq2SeqTransformer>(config_, device_);  // the optimizer state follows the parameters
    AdamOptions adam;
    adam.lr = settings_.lr;
    opt_ = std::make_unique<Adam>(model_->named_parameters(), adam);
    params_ = model_->parameters();
    schedule_ = make_schedule(settings_);
    plan_ = std::make_unique<BatchPlan>(data_.train, settings_.batch_tokens);
    if (o_.resume && !resume_state()) return false;
    if (ranks_ > 1) {
      require_same_as_root(comm_, Json{{"parameters", hex(parameter_fingerprint())}, {"step", s_.step}},
                           "model state (initial or resumed parameters)");
      gradient_comm_ = distributed::gradient_communicator(device_, comm_);  // NCCL for CUDA gradients, where built
      reducer_ = std::make_unique<distributed::GradientReducer>(gradient_comm_ ? *gradient_comm_ : comm_, params_);
      progress_.message(cat("data parallel: ", (gradient_comm_ ? *gradient_comm_ : comm_).describe(), "; each takes ", settings_.accumulate, " of the ",
                            ranks_ * settings_.accumulate, " shares of every batch; gradients summed in ", reducer_->buckets(),
                            " buckets during backward; evaluation and every file on rank 0"));
    }
    progress_.message(cat("model: ", model_->parameter_count(), " parameters, ", config_.encoder_layers, "+",
                          config_.decoder_layers, " layers, d ", config_.d_model, ", ", config_.heads, " heads, ffn ",
                          config_.ffn, ", ", settings_.attention, " attention, on ", device_name(model_->device()),
                          settings_.precision == "bf16" ? " (mixed precision: bf16 products in the linear layers)" : "", "; ",
                          plan_->batches_per_epoch(), " batches of <= ", settings_.batch_tokens, " tokens per epoch; lr: ",
                          schedule_->describe()));
    const std::size_t dev = data_.dev.size();
    const auto scored = settings_.eval_sentences > 0 ? std::min<std::size_t>(dev, static_cast<std::size_t>(settings_.eval_sentences)) : dev;
    progress_.message(cat("budget: ", settings_.max_steps, " steps", settings_.max_minutes > 0 ? cat(" or ", settings_.max_minutes, " minutes") : std::string(" (no time limit)"),
                          ", patience ", settings_.patience, " evaluations; every ", settings_.eval_every,
                          " steps: dev loss on all ", dev, " dev pairs, BLEU and chrF (beam ", settings_.beam, ") on ",
                          scored == dev ? cat("all of them") : cat("the first ", scored, " (--eval-sentences; 0: all)"),
                          "; checkpoints/best by dev ", metric_name(settings_)));
    check_signal("building the model");
    return true;
  }

  // ---- phase 4: the loop ----
  int train_until_stopped() {
    start_ = window_start_ = Clock::now();
    seconds_before_ = s_.train_seconds;  // spent by earlier processes of this run
    last_saved_step_ = o_.resume ? s_.step : -1;
    model_->train();
    while (s_.step < settings_.max_steps) {
      if (!next_batch()) continue;  // an epoch ended
      if (!step()) continue;        // a skipped batch (--on-nan skip)
      s_.train_seconds = ranks_ > 1 ? agreed_train_seconds_ : seconds_before_ + seconds_since(start_);
      log_progress();
      const bool interrupted = ranks_ > 1 ? agreed_stop_ : StopSignals::received() != 0;
      const bool out_of_time = settings_.max_minutes > 0 && s_.train_seconds >= settings_.max_minutes * 60;
      // The run's final evaluation happens when its budget is reached, even if a signal came
      // during that step: a resume would find the run finished and never evaluate it.
      const bool budget_reached = s_.step >= settings_.max_steps || out_of_time;
      if (s_.step % settings_.eval_every == 0 || budget_reached) {
        const Clock::time_point eval_start = Clock::now();
        const bool patience_ended = evaluate_and_save();
        last_eval_seconds_ = seconds_since(eval_start);
        window_eval_seconds_ += last_eval_seconds_;
        if (patience_ended) break;
      } else if (settings_.save_every > 0 && s_.step % settings_.save_every == 0) {
        save_last();
      }
      if (interrupted) break;
      if (out_of_time) {
        stop_reason_ = cat("the time budget (", settings_.max_minutes, " minutes)");
        break;
      }
    }
    return report();
  }

 private:
  using Clock = std::chrono::steady_clock;

  // "nothing was saved/changed": what a failure or a signal before the loop leaves.
  std::string before_the_loop() const {
    return o_.resume ? cat("nothing was changed; ", run_.last(), " is as it was: resume again")
                     : std::string("nothing was saved; run the same command to start again");
  }
  void check_signal(const std::string& doing) const { StopSignals::throw_if_received(doing, before_the_loop()); }

  // The settings this resume changes (flags or --config given with --resume) are printed and
  // stored in options.json, so that the next plain `train --run R --resume` keeps them.
  void store_resume_changes() {
    const Json saved = to_json(load_run_settings(run_.options()));
    const Json now = to_json(settings_);
    std::string changes;
    for (const auto& item : now.items()) {
      if (saved.contains(item.key()) && saved.at(item.key()) == item.value()) continue;
      changes += cat(changes.empty() ? "" : ", ", item.key(), " ",
                     saved.contains(item.key()) ? saved.at(item.key()).dump() : "(unset)", " -> ", item.value().dump());
    }
    if (changes.empty()) return;
    progress_.message(cat("resume changes ", changes, " (stored in ", run_.options(), ")"));
    const std::string text = dump_json(now, 2) + "\n";
    write_file_atomically(run_.options(), [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  }

  void write_new_run_files() {
    remove_attempt_leftovers(run_, to_json(settings_), progress_);
    std::error_code ec;
    fs::create_directories(run_.checkpoints(), ec);
    QKGRAD_CHECK(!ec && fs::is_directory(run_.checkpoints()), "train: cannot create the run directory ",
                 run_.checkpoints(), ": ", ec ? ec.message() : "not a directory",
                 "; choose a --run where you may create directories");
    const std::string text = dump_json(to_json(settings_), 2) + "\n";
    write_file_atomically(run_.options(), [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  }

  // A joint SentencePiece model on whitespace-normalised copies of both sides, so that the
  // subwords see exactly what the model will.
  void train_subwords() {
    progress_.message(cat("training a joint SentencePiece model (", settings_.vocab_size, " pieces) on ",
                          split_file(settings_.data_dir, "train", settings_.src), " and ", split_file(settings_.data_dir, "train", settings_.tgt)));
    const std::string joint = run_.root + "/subword_training.txt";
    write_file_atomically(joint, [&](std::FILE* f) {
      for (const auto* side : {&train_text_.src, &train_text_.tgt}) {
        for (const auto& line : *side) std::fprintf(f, "%s\n", line.c_str());
      }
    });
    try {
      Subwords::train({{joint}, subwords_file(run_), static_cast<int>(settings_.vocab_size), static_cast<uint64_t>(settings_.seed)});
    } catch (...) {
      fs::remove(joint);
      throw;
    }
    fs::remove(joint);
  }

  // Subword ids of every pair, and L, the 97.5th percentile of the training lengths (QKNorm's g0).
  void encode_data() {
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
    progress_.message(cat("subwords: ", subwords_->vocab_size(), " pieces; ", data_.train.size(), " training pairs (",
                          data_.dropped_long, " longer than ", settings_.max_length,
                          " dropped); L = 97.5th percentile of lengths = ", L_,
                          " -> QKNorm g0 = log2(L^2 - L) = ", fmt("%.2f", qknorm_initial_g(std::max(L_, 2.0)))));
  }

  // The weights, optimizer and loop state of checkpoints/last. A finished run stays finished: a
  // requeued job that resumes it reproduces the run that was not interrupted, instead of training
  // on (raise the budget that stopped it to do that). Returns false for a finished run.
  bool resume_state() {
    try {
      load_model_weights(run_.last(), *model_);
      s_ = from_trainer_state(load_trainer_state(run_.last()), *opt_, *schedule_, *model_, plan_->batches_per_epoch());
    } catch (const Error& e) {
      fail(cat("train --resume: cannot continue from ", run_.last(), ": ", e.what(),
               ". It does not fit this run's options.json and data, or it is damaged: resume with the options the run "
               "was started with, or start a new --run"));
    }
    if (const std::string why = finished_because(s_, settings_); !why.empty()) {
      progress_.message(cat(o_.run_dir, " is finished: it stopped at step ", s_.step, " because ", why,
                            "; ", best_text(s_, settings_), ". Nothing to do (to train on, raise that budget)"));
      return false;
    }
    int64_t dropped_partial = 0;
    history_ = reload_metrics(run_.metrics(), s_.step, &dropped_partial);
    // Epochs counted from 1, as in the log lines and metrics.jsonl.
    progress_.message(cat("resumed from ", run_.last(), " at step ", s_.step, " (epoch ", s_.epoch + 1, ", after ",
                          s_.position, " of its batches)",
                          dropped_partial ? cat("; dropped a half-written last line of ", run_.metrics()) : ""));
    return true;
  }

  // The batch at the current position of the epoch order; false (and the next epoch) at its end.
  bool next_batch() {
    if (order_epoch_ != s_.epoch) {  // the permutation of an epoch, made once per epoch
      order_ = plan_->epoch_order(static_cast<uint64_t>(settings_.seed), s_.epoch);
      order_epoch_ = s_.epoch;
    }
    const std::vector<int64_t>& order = order_;
    if (s_.position >= static_cast<int64_t>(order.size())) {
      ++s_.epoch;
      s_.position = 0;
      return false;
    }
    batch_ = make_batch(data_.train, plan_->group(order[static_cast<std::size_t>(s_.position)]), device_,
                        special_ids(config_));
    return true;
  }

  // One training step, the lesson: zero the gradients; forward, loss and backward; the NaN
  // guard; clip the gradient norm and update. False when the batch was skipped (--on-nan skip).
  bool step() {
    if (o_.inject_rank_death_at_step == s_.step + 1 && ranks_ > 1 && comm_.rank() == ranks_ - 1) std::raise(SIGKILL);
    const MixedPrecision policy(parse_precision(settings_.precision));  // ops/precision.h: the policy
    opt_->zero_grad();
    grad_norm_ = NAN;
    const double loss = forward_and_backward();  // the batch's loss per target token
    if (std::isfinite(loss)) grad_norm_ = grad_norm(params_);
    if (!std::isfinite(loss) || !std::isfinite(grad_norm_)) return guard_non_finite(loss);
    opt_->set_lr(schedule_->lr(opt_->steps() + 1));
    opt_->step(clip_factor(grad_norm_, settings_.clip));  // clipping inside Adam's one pass
    check_update_finite();
    count_step(loss);
    return true;
  }

  // Forward and backward of the batch; returns its loss per target token (non-finite: nothing
  // was backpropagated). With --accumulate K, or in a data-parallel job, the batch runs as
  // micro-batches: this rank's K of the ranks·K shares of its pairs (rank_shares), each
  // forward and backward in turn so that their gradients add up. Each micro-batch's loss is
  // divided by the whole batch's target tokens, so the sum over micro-batches and ranks is the
  // batch's loss per token and the gradients are the batch's (to float32 summation order). In a
  // job the ranks then agree on the loss (a NaN on any rank skips or stops the batch
  // everywhere) before this rank's last backward, during which the reducer sums the gradients
  // over the ranks.
  double forward_and_backward() {
    const double tokens = static_cast<double>(std::max<int64_t>(batch_.tgt_tokens, 1));  // non-pad targets
    double loss = 0;   // this rank's part of the batch's loss; after agree_on_loss, the batch's
    Tensor last_loss;  // the last micro-batch's loss, whose backward waits for the agreement
    if (ranks_ * settings_.accumulate == 1) {
      last_loss = micro_loss(batch_, tokens, loss);  // the common case: no split, no copy
    } else {
      const auto shares = rank_shares(batch_.indices, comm_.rank(), ranks_, settings_.accumulate);
      for (std::size_t k = 0; k < shares.size(); ++k) {
        if (shares[k].empty() || !std::isfinite(loss)) continue;
        if (last_loss.defined()) last_loss.backward();  // the previous micro-batch's
        start_micro_dropout(comm_.rank() * settings_.accumulate + static_cast<int64_t>(k));
        last_loss = micro_loss(make_batch(data_.train, shares[k], device_, special_ids(config_)), tokens, loss);
      }
    }
    if (o_.inject_nan_at_step == s_.step + 1 && !nan_injected_) {  // testing the guard (once)
      nan_injected_ = true;
      loss = NAN;
    }
    if (ranks_ > 1) agree_on_loss(loss);
    if (!std::isfinite(loss)) {
      tape().clear();  // no backward through a non-finite loss
      return loss;
    }
    if (last_loss.defined()) {  // a rank may have no pairs in a small batch
      reducer_ ? backward(last_loss, Tensor::ones(last_loss.shape(), last_loss.dtype(), last_loss.device()), reducer_->hook())
               : last_loss.backward();
    }
    if (reducer_) {
      reducer_->finish();  // the gradients, summed over the ranks (zeros from a rank without pairs)
      window_comm_seconds_ += reducer_->last_wait_seconds();
    }
    return loss;
  }

  // The counters of a step taken.
  void count_step(double loss) {
    ++s_.step;
    ++s_.position;
    s_.tokens_seen += static_cast<double>(batch_.tgt_tokens);
    s_.window_loss += loss;
    ++s_.window_steps;
    window_tokens_ += static_cast<double>(batch_.src_tokens + batch_.tgt_tokens);
    ++timed_steps_;
  }

  // The loss of one (micro-)batch divided by the whole batch's target tokens; adds its value to
  // `sum` (to the host: on a GPU this waits for the forward).
  Tensor micro_loss(const Batch& micro, double tokens, double& sum) {
    const uint64_t dropout_start = model_->dropout_generator().offset();
    const Tensor logits = model_->forward(micro.src, micro.src_lengths, micro.tgt_in, micro.tgt_lengths);
    const LossSum loss = cross_entropy(logits, micro.tgt_out, settings_.label_smoothing, config_.pad_id);
    QKGRAD_CHECK(ranks_ * settings_.accumulate == 1 || model_->dropout_generator().offset() - dropout_start < kMicroDropoutBlocks,
                 "train: one micro-batch drew more than 2^32 dropout blocks; use a smaller --batch-tokens");
    Tensor part = loss.sum / tokens;
    sum += part.item();
    return part;
  }

  // With micro-batches, the dropout of share j of step n draws from block (n·ranks·K + j)·2^32
  // on: a share gets the same masks on whichever rank, or in whichever layout of ranks and
  // --accumulate, it runs, and a resume needs no per-rank generator state. (A single process
  // without --accumulate draws on from where it is, as it always has.)
  static constexpr uint64_t kMicroDropoutBlocks = uint64_t{1} << 32;
  void start_micro_dropout(int64_t share) {
    const auto j = static_cast<uint64_t>(s_.step * ranks_ * settings_.accumulate + share);
    model_->dropout_generator().set_offset(j * kMicroDropoutBlocks);
  }

  // The ranks' parts of the loss summed (the batch's loss), whether any rank got a stop signal,
  // and rank 0's training clock (so that every rank sees the same time budget run out).
  void agree_on_loss(double& loss_value) {
    const Clock::time_point start = Clock::now();
    std::vector<double> agreed{loss_value, StopSignals::received() != 0 ? 1.0 : 0.0,
                               comm_.is_root() ? seconds_before_ + seconds_since(start_) : 0.0};
    comm_.sum(agreed);
    loss_value = agreed[0];
    agreed_stop_ = agreed[1] > 0;
    agreed_train_seconds_ = agreed[2];
    window_comm_seconds_ += seconds_since(start);
  }

  // The parameters' bits, compared across the ranks before training.
  uint64_t parameter_fingerprint() const {
    uint64_t hash = kFingerprintStart;
    NoGradGuard reading;  // the parameters require grad; reading their bits is no op of the tape
    for (const Tensor& p : params_) {
      const Tensor host = p.device() == Device::cpu ? p : p.to(Device::cpu);
      hash = fingerprint(host.raw_data(), host.nbytes(), hash);
    }
    return hash;
  }
  // The corpus every rank read, compared across the ranks before anything is written.
  Json data_fingerprint() const {
    return Json{{"train pairs", train_text_.src.size()},
                {"train text", hex(fingerprint(train_text_.tgt, fingerprint(train_text_.src)))},
                {"dev pairs", dev_text_.src.size()},
                {"dev text", hex(fingerprint(dev_text_.tgt, fingerprint(dev_text_.src)))}};
  }

  // The NaN guard: a non-finite loss or gradient never reaches the parameters or the optimizer
  // state. Skip the batch (--on-nan skip; returns false) or stop with a checkpoint of the last
  // good state (the parameters are still those from before this batch).
  bool guard_non_finite(double loss_value) {
    const std::string culprit = std::isfinite(loss_value) ? "the gradient of " + first_non_finite(*model_, params_, true) : "the loss";
    const std::string what = cat("step ", s_.step + 1, " (epoch ", s_.epoch + 1, ", batch ", s_.position,
                                 " of the epoch order, ", batch_.indices.size(),
                                 " sentence pairs starting with training pair ", batch_.indices.front(), "): ", culprit,
                                 " is not finite (loss ", loss_value, ", gradient norm ", grad_norm_, ")");
    opt_->zero_grad();
    if (o_.on_nan == "skip") {
      ++s_.skipped_batches;
      ++s_.position;
      progress_.message(cat("skipped ", what, "; ", s_.skipped_batches, " batches skipped so far"));
      return false;
    }
    save_last();
    const std::string message = cat("train: ", what, ". Nothing was updated; ", run_.last(),
                                    " holds the state before this batch. Lower --lr (or raise --warmup) and --resume, or rerun with "
                                    "--on-nan skip to skip such batches");
    if (ranks_ > 1) throw JobWideError(message);  // every rank saw the same loss and gradients
    fail(message);
  }

  // The update itself must leave finite weights (a non-finite optimizer moment, an overflow):
  // otherwise the weights are lost for good, and nothing of them may be saved.
  void check_update_finite() {
    const std::string bad = first_non_finite(*model_, params_, false);
    if (bad.empty()) return;
    fail(cat("train: the update of step ", s_.step + 1, " made the parameter ", bad,
             " non-finite, although the loss and the gradients were finite (an optimizer moment is not finite, or "
             "the update overflowed). Nothing was saved; ",
             last_saved_step_ >= 0 ? cat(run_.last(), " holds step ", last_saved_step_, ": --resume from it with a lower --lr")
                                   : std::string("no checkpoint was saved: start again with a lower --lr")));
  }

  // The live line (on a terminal, every step) and, every --log-every steps, a log line and a
  // metrics line. Tokens/s and the ETA count training time only: evaluations are left out of
  // the window (eval_seconds_) and added to the ETA once per evaluation still to come.
  void log_progress() {
    if (!comm_.is_root()) return;  // rank 0 alone shows and writes the progress
    const bool log_line = s_.step % settings_.log_every == 0;
    if (!log_line && !progress_.terminal()) return;
    const double elapsed = s_.train_seconds;
    const double window_seconds = std::max(seconds_since(window_start_) - window_eval_seconds_, 1e-9);
    const double tps = window_tokens_ / window_seconds;
    const int64_t steps_left = settings_.max_steps - s_.step;
    const double evals_left = static_cast<double>(steps_left / settings_.eval_every + 1);
    double eta = static_cast<double>(steps_left) * window_seconds / static_cast<double>(std::max<int64_t>(timed_steps_, 1)) +
                 evals_left * last_eval_seconds_;
    double done = static_cast<double>(s_.step) / static_cast<double>(settings_.max_steps);
    if (settings_.max_minutes > 0) {  // the time budget may end the run first
      eta = std::min(eta, settings_.max_minutes * 60 - elapsed);
      done = std::max(done, elapsed / (settings_.max_minutes * 60));
    }
    const double window_mean = s_.window_loss / static_cast<double>(std::max<int64_t>(s_.window_steps, 1));
    const std::string where = cat("step ", s_.step, "/", settings_.max_steps, " ", fmt("%3.0f", 100 * std::min(done, 1.0)), "%");
    if (!log_line) {
      progress_.live(where, done, cat("loss ", fmt("%.3f", window_mean), " | ", fmt("%.0f", tps), " tok/s | ETA ",
                                      clock_text(std::max(eta, 0.0))));
      return;
    }
    Json m = Json::object();
    m["step"] = s_.step;
    m["epoch"] = s_.epoch + 1;
    m["train_loss"] = window_mean;
    m["lr"] = opt_->lr();
    m["tokens_per_s"] = tps;
    m["grad_norm"] = grad_norm_;
    m["elapsed_s"] = elapsed;
    m["g"] = current_gains();
    const double comm_ms = 1000 * window_comm_seconds_ / static_cast<double>(std::max<int64_t>(timed_steps_, 1));
    if (ranks_ > 1) m["comm_ms_per_step"] = comm_ms;  // waiting for the other ranks (not hidden by backward)
    append_metrics(run_.metrics(), m, history_);
    progress_.log(cat(where, " | epoch ", s_.epoch + 1, " | loss ", fmt("%.3f", window_mean), " | ", fmt("%.0f", tps),
                      " tok/s | lr ", fmt("%.2e", opt_->lr()), ranks_ > 1 ? cat(" | comm ", fmt("%.1f", comm_ms), " ms/step") : "",
                      " | elapsed ", clock_text(elapsed), " | ETA ", clock_text(std::max(eta, 0.0))));
    window_start_ = Clock::now();
    window_tokens_ = 0;
    window_eval_seconds_ = 0;
    window_comm_seconds_ = 0;
    timed_steps_ = 0;
    s_.window_loss = 0;
    s_.window_steps = 0;
  }

  // Dev loss, BLEU and chrF; best saved when BLEU improves, last always. True when patience
  // ends the run.
  // In a data-parallel job rank 0 evaluates and sends the numbers to the others, which wait.
  bool evaluate_and_save() {
    Evaluation e;
    if (comm_.is_root()) {
      e = evaluate(*model_, data_, *subwords_, settings_, [&](double fraction, const std::string& what) {
        progress_.live(cat("eval at step ", s_.step), fraction, what);
      });
    }
    if (ranks_ > 1) {
      std::vector<double> numbers{e.loss, e.bleu, e.chrf};
      comm_.broadcast(numbers, 0);
      e.loss = numbers[0], e.bleu = numbers[1], e.chrf = numbers[2];
    }
    const double value = metric_value(e, settings_);
    schedule_->report(settings_.best_metric == "loss" ? -value : value);  // higher is better
    const bool better = improves(value, s_.best, settings_);
    if (better) {
      s_.best = value;
      s_.evals_since_best = 0;
      save(run_.best(), nullptr);
    } else {
      ++s_.evals_since_best;
    }
    Json m = Json::object();
    m["step"] = s_.step;
    m["dev_loss"] = e.loss;
    m["dev_bleu"] = e.bleu;
    m["dev_chrf"] = e.chrf;
    m["lr"] = opt_->lr();
    m["elapsed_s"] = seconds_before_ + seconds_since(start_);
    if (comm_.is_root()) append_metrics(run_.metrics(), m, history_);
    progress_.message(cat("eval at step ", s_.step, ": dev loss ", fmt("%.3f", e.loss), ", ", e.bleu_line, ", chrF ",
                          fmt("%.1f", e.chrf),
                          better ? cat(" (best ", metric_name(settings_), " so far: saved)") : cat(" (", best_text(s_, settings_), ")")));
    save_last();
    if (s_.evals_since_best < settings_.patience) return false;
    stop_reason_ = cat("patience (", settings_.patience, " evaluations without a better dev ", metric_name(settings_), ")");
    return true;
  }

  // A failed save stops the run with what to do; the checkpoint it would have replaced is
  // unchanged (io/checkpoint.h). A save is refused when the state is not finite.
  void save(const std::string& dir, const TrainerState* t) {
    if (!comm_.is_root()) return;  // rank 0 alone writes
    const std::string kept = last_saved_step_ >= 0 ? cat(run_.last(), " holds step ", last_saved_step_)
                                                   : std::string("no checkpoint was saved");
    try {
      save_checkpoint(dir, *model_, t);
    } catch (const NonFiniteState& e) {
      fail(cat("train: at step ", s_.step, ": ", e.what(), ". Training stopped: the state diverged; ", kept,
               last_saved_step_ >= 0 ? ", the last finite state: --resume from it with a lower --lr (or a longer --warmup)"
                                     : ": start again with a lower --lr (or a longer --warmup)"));
    } catch (const Error& e) {
      // Most often a full disk (the error above says so), but not always: say what to do for both.
      fail(cat("train: at step ", s_.step, ": ", e.what(), ". Training stopped; ", kept,
               last_saved_step_ >= 0 ? ": free some disk space (or fix what the error names) and continue with --resume"
                                     : ": free some disk space (or fix what the error names) and start again"));
    }
  }
  // checkpoints/last, and with --keep-last K a model-only copy checkpoints/step-N of which the
  // K newest are kept (for `average`, or to go back to an earlier point).
  void save_last() {
    const TrainerState t = to_trainer_state(s_, *opt_, *schedule_, *model_);
    save(run_.last(), &t);
    last_saved_step_ = s_.step;
    if (settings_.keep_last == 0 || !comm_.is_root()) return;
    save(cat(run_.checkpoints(), "/step-", s_.step), nullptr);
    std::vector<std::string> kept = kept_step_checkpoints(run_.checkpoints());
    for (std::size_t i = 0; i + static_cast<std::size_t>(settings_.keep_last) < kept.size(); ++i) {
      std::error_code ec;
      fs::remove_all(kept[i], ec);  // a failure leaves one more copy, nothing worse
    }
  }

  Json current_gains() const {
    Json g = Json::object();
    for (const auto& [name, t] : model_->attention_gains()) g[name] = t.numel() == 1 ? t.item() : mean(t).item();
    return g;
  }

  // The last save, the curves, and how the run ended: 0, or 128 + the signal that stopped it.
  int report() {
    save_last();
    if (comm_.is_root()) write_curves(run_, history_, cat("qkgrad ", settings_.attention, " ", settings_.src, "→", settings_.tgt, " (", settings_.preset, ")"),
                 settings_.best_metric);
    if (const int signal = StopSignals::received(); signal != 0) {
      progress_.message(cat("interrupted by ", signal_name(signal), " at step ", s_.step, "; saved ", run_.last(),
                            ". Continue with the same command plus --resume"));
      return 128 + signal;
    }
    progress_.message(cat("stopped at step ", s_.step, " after ", clock_text(s_.train_seconds), " because of ", stop_reason_,
                          "; ", best_text(s_, settings_), ". Checkpoints: ", run_.best(), ", ",
                          run_.last(), "; curves: ", run_.curves()));
    return 0;
  }

  const TrainOptions& o_;
  const RunSettings& settings_;
  const Device device_;
  const RunDir run_;
  distributed::Communicator& comm_;
  const int ranks_;
  std::unique_ptr<distributed::Communicator> gradient_comm_;  // NCCL's, for gradients on a GPU (else comm_)
  std::unique_ptr<distributed::GradientReducer> reducer_;     // in a data-parallel job
  bool agreed_stop_ = false;          // agree_on_loss: a rank got a stop signal
  double agreed_train_seconds_ = 0;   // agree_on_loss: rank 0's training clock
  double window_comm_seconds_ = 0;    // time spent waiting for the other ranks in this log window
  Progress progress_;
  std::optional<RunLock> lock_;           // held until the run ends (declared before cleanup_,
  std::optional<NewRunCleanup> cleanup_;  // so that a cleanup runs while the lock is held)
  ParallelCorpus train_text_, dev_text_;
  std::unique_ptr<Subwords> subwords_;
  EncodedData data_;
  double L_ = 2;
  TransformerConfig config_;
  std::unique_ptr<Seq2SeqTransformer> model_;
  std::unique_ptr<Adam> opt_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<BatchPlan> plan_;
  std::vector<Tensor> params_;       // model_->parameters(), made once
  std::vector<int64_t> order_;       // the batch order of epoch order_epoch_
  int64_t order_epoch_ = -1;
  LoopState s_;
  History history_;
  Batch batch_;
  double grad_norm_ = NAN;
  bool nan_injected_ = false;
  std::string stop_reason_ = "the step budget (--max-steps)";
  int64_t last_saved_step_ = -1;
  Clock::time_point start_, window_start_;
  double seconds_before_ = 0;
  double window_tokens_ = 0;  // for tokens/s and the ETA (s_.window_loss and s_.window_steps: the logged loss)
  int64_t timed_steps_ = 0;
  double window_eval_seconds_ = 0;  // evaluation time inside the current window (left out of tokens/s)
  double last_eval_seconds_ = 0;    // how long the last evaluation took (for the ETA)
};

}  // namespace

int train(const TrainOptions& options) {
  const std::unique_ptr<distributed::Communicator> one = distributed::single_process();
  return train(options, *one);
}

int train(const TrainOptions& options, distributed::Communicator& comm) {
  const Device device = check_train_settings(options.settings);
  QKGRAD_CHECK(!options.run_dir.empty(), "train: --run is required");
  if (comm.size() > 1) {  // before anything is read or written: the same command on every rank
    Json same = to_json(options.settings);
    same["run"] = fs::absolute(options.run_dir).lexically_normal().string();
    same["resume"] = options.resume;
    same["on_nan"] = options.on_nan;
    same["inject_nan_at_step"] = options.inject_nan_at_step;
    same["inject_rank_death_at_step"] = options.inject_rank_death_at_step;
    require_same_as_root(comm, same, "options");
  }
  if (options.threads > 0) {
    set_num_threads(static_cast<int>(options.threads));
  } else if (comm.size() > 1) {
    set_num_threads(threads_per_rank(distributed::launched_local_ranks()));  // not every rank on every core
  }
  StopSignals stop_signals;  // from here on SIGINT, SIGTERM and SIGHUP stop the run cleanly
  if (comm.size() == 1) {
    // Said at once, while the step or dev evaluation in progress finishes (that can take a
    // while); on a terminal it first clears the row of the live line, which holds the echo "^C".
    StopSignals::set_note(cat(::isatty(STDERR_FILENO) == 1 ? "\r\x1b[K" : "",
                              "qkgrad-translate train: stopping: the step (or dev evaluation) in progress finishes, then ",
                              options.run_dir, "/checkpoints/last is saved. A second Ctrl-C stops at once, losing the steps "
                              "since the last save\n"));
  } else {
    StopSignals::set_note(cat("qkgrad-translate train (rank ", comm.rank(), " of ", comm.size(),
                              "): stopping on a signal. Under mpirun this is how the job ends when a rank fails or mpirun "
                              "itself is stopped; mpirun's message names the rank. Every checkpoint in ", options.run_dir,
                              "/checkpoints is intact (each is written atomically): continue with the same command plus --resume\n"));
  }
  TrainingRun run(options, device, comm);
  run.prepare_run_directory();
  run.load_data();
  if (!run.build_model()) return 0;  // a finished run, resumed
  return run.train_until_stopped();
}

}  // namespace qkgrad::translation
