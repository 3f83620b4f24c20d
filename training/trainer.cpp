#include "training/trainer.h"

#include <errno.h>  // program_invocation_short_name (glibc)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "distributed/gradient_reducer.h"
#include "io/atomic_file.h"
#include "io/text.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "training/data_parallel.h"
#include "training/stop_signals.h"

namespace qkgrad::training {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string clock_text(double seconds) {
  const int64_t s = static_cast<int64_t>(std::max(0.0, seconds));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", static_cast<long>(s / 3600), static_cast<long>((s / 60) % 60),
                static_cast<long>(s % 60));
  return buf;
}

// The trainer state of a checkpoint: optimizer moments plus every counter of the loop.
struct LoopState {
  int64_t step = 0, epoch = 0, position = 0;  // the next batch is epoch_order(epoch)[position]
  double best = -1;  // the best dev value of the best metric so far; -1: none yet
  int64_t evals_since_best = 0;
  double tokens_seen = 0;
  int64_t skipped_batches = 0;  // batches skipped by the NaN guard (--on-nan skip)
  // The training loss summed since the last metrics line, and its steps: saved so that a
  // resumed run logs the same train_loss as an uninterrupted one.
  double window_loss = 0;
  int64_t window_steps = 0;
  double train_seconds = 0;  // training time over all processes of the run (the --max-minutes budget)
};

std::unique_ptr<LrSchedule> make_schedule(const LoopSettings& p) {
  if (p.schedule == "cosine") return std::make_unique<CosineLr>(p.lr, p.warmup, std::max(p.max_steps, p.warmup + 1), 0.0);
  if (p.schedule == "inverse_sqrt") return std::make_unique<InverseSqrtLr>(p.lr, std::max<int64_t>(p.warmup, 1));
  // The paper: x0.8 after 3 evaluations without a better BLEU; its code: when one is below each of the 3 before it.
  const PlateauRule rule = p.schedule == "decline" ? PlateauRule::decline : PlateauRule::stall;
  return std::make_unique<PlateauLr>(p.lr, p.warmup, 0.8, 3, rule);
}

TrainerState to_trainer_state(const LoopState& s, const Optimizer& opt, const LrSchedule& schedule, Generator& dropout) {
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
  t.set_int("dropout_rng_offset", static_cast<int64_t>(dropout.offset()));
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

LoopState from_trainer_state(const TrainerState& t, Optimizer& opt, LrSchedule& schedule, Generator& dropout,
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
  dropout.set_offset(static_cast<uint64_t>(get_count(t, "dropout_rng_offset")));
  std::map<std::string, double> sched;
  for (const auto& [key, value] : t.values) {
    if (key.rfind("schedule.", 0) == 0) sched[key.substr(9)] = get_finite(t, key, -kHuge, kHuge);
  }
  schedule.load_state(sched);
  return s;
}

// On --resume: what defines the model, the data and their order must match options.json; the
// recipe (learning rate, warmup, schedule, dropout, label smoothing, budgets) may change, e.g. to
// get past a NaN with a lower learning rate (the continuation is then no longer bit-identical to
// an uninterrupted run with the old recipe, of course). So may the device: checkpoints do not
// depend on it (a run started on a GPU can continue on the CPU and vice versa).
void check_resumed_options(const RunDir& run, const Json& now, const Task& task) {
  const Json saved = parse_json(read_file(run.options(), 1 << 20), run.options());
  QKGRAD_CHECK(saved.is_object(), run.options(), ": must be a JSON object; it is damaged (train into a new --run)");
  for (const auto& [key, value] : now.items()) {
    if (!task.fixed_on_resume(key)) continue;
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

bool improves(double value, double best, const LoopSettings& p) {
  if (best < 0) return true;  // the first evaluation
  return p.lower_is_better ? value < best : value > best;
}
std::string best_text(const LoopState& s, const LoopSettings& p) {
  if (s.best < 0) return cat("no dev ", p.best_metric_label, " yet");
  return cat("best dev ", p.best_metric_label, " ", format_number(p.lower_is_better ? "%.3f" : "%.2f", s.best));
}

// The paper's code's stop rule: past the warmup, the rate of the next update is below --stop-lr
// (the plateau schedule has cut it often enough).
bool below_stop_lr(const LoopState& s, const LoopSettings& p, const LrSchedule& schedule) {
  return p.stop_lr > 0 && s.step >= p.warmup && schedule.lr(s.step + 1) < p.stop_lr;
}
std::string rate_text(const LoopState& s, const LrSchedule& schedule) {
  return format_number("%.3g", schedule.lr(s.step + 1));
}

// Why a resumed run has nothing left to do under the current budgets, or "" if it has.
std::string finished_because(const LoopState& s, const LoopSettings& p, const LrSchedule& schedule) {
  if (s.step >= p.max_steps) return cat("it reached the step budget (--max-steps ", p.max_steps, ")");
  if (s.evals_since_best >= p.patience) {
    return cat("of patience (", s.evals_since_best, " evaluations without a better dev ", p.best_metric_label,
               "; --patience ", p.patience, ")");
  }
  if (below_stop_lr(s, p, schedule)) return cat("its learning rate (", rate_text(s, schedule), ") fell below --stop-lr ", p.stop_lr);
  if (p.max_minutes > 0 && s.train_seconds >= p.max_minutes * 60) {
    return cat("it used its time budget (", format_number("%.1f", s.train_seconds / 60), " of --max-minutes ", p.max_minutes, ")");
  }
  return "";
}

// The name of the first parameter (or its gradient) holding a NaN or ±inf, or "". `params` is
// the model's parameters() (the training run keeps that list): one pass over all of them covers
// the common, finite case; only then are the names looked up, one tensor at a time.
std::string first_non_finite(const Module& model, const std::vector<Tensor>& params, bool gradients) {
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
class Trainer {
 public:
  Trainer(Task& task, const LoopSettings& settings, const LoopOptions& options, distributed::Communicator& comm)
      : task_(task), settings_(settings), o_(options), run_{options.run_dir}, comm_(comm), ranks_(comm.size()),
        progress_(comm.is_root(), comm.size() == 1),
        context_{run_, options.resume, comm, progress_, [this](const std::string& doing) { check_signal(doing); }} {}

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
      check_resumed_options(run_, task_.settings_json(), task_);
      store_resume_changes();
      return;
    }
    // A lock file already there: another process may be training this run right now. Ask the
    // lock first, so that a second process is told about the first one, not about the files the
    // first one is writing (its subword temporaries, say).
    std::error_code exists_ec;
    if (fs::exists(run_.lock(), exists_ec)) lock_.emplace(run_);
    refuse_foreign_directory(run_, task_.files());
    cleanup_.emplace(run_, task_.files());  // notes what exists before anything is created
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

  // ---- phase 2: the data (read and checked before anything is written), the task's files ----
  void load_data() {
    task_.read_data(context_);
    require_same_as_root(comm_, task_.data_fingerprint(), "data");
    if (comm_.is_root()) {
      if (!o_.resume) write_new_run_files();
      task_.make_files(context_);
    }
    comm_.barrier();  // the other ranks read the files rank 0 wrote (a shared run directory)
    task_.prepare_data(context_);
  }

  // ---- phase 3: the model, its optimizer and schedule; on --resume, their saved state ----
  // Returns false when a resumed run is already finished (it says so).
  bool build_model() {
    model_ = &task_.build_model(context_);  // the optimizer state follows the parameters
    AdamOptions adam = settings_.adam;
    adam.lr = settings_.lr;
    opt_ = std::make_unique<Adam>(model_->named_parameters(), adam);
    params_ = model_->parameters();
    schedule_ = make_schedule(settings_);
    if (o_.resume && !resume_state()) return false;
    if (ranks_ > 1) start_data_parallel();
    progress_.message(cat(task_.describe_model(), "; ", task_.describe_batches(), "; lr: ", schedule_->describe()));
    progress_.message(cat("budget: ", settings_.max_steps, " steps",
                          settings_.max_minutes > 0 ? cat(" or ", settings_.max_minutes, " minutes") : std::string(" (no time limit)"),
                          ", patience ", settings_.patience, " evaluations",
                          settings_.stop_lr > 0 ? cat(", until the learning rate is below ", settings_.stop_lr) : std::string(),
                          "; every ", settings_.eval_every, " steps: ",
                          task_.describe_evaluation(), "; checkpoints/best by dev ", settings_.best_metric_label));
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
  // "nothing was saved/changed": what a failure or a signal before the loop leaves.
  std::string before_the_loop() const {
    return o_.resume ? cat("nothing was changed; ", run_.last(), " is as it was: resume again")
                     : std::string("nothing was saved; run the same command to start again");
  }
  void check_signal(const std::string& doing) const { StopSignals::throw_if_received(doing, before_the_loop()); }

  // The settings this resume changes (flags or --config given with --resume) are printed and
  // stored in options.json, so that the next plain `train --run R --resume` keeps them.
  void store_resume_changes() {
    const Json saved = task_.saved_settings(run_.options());
    const Json now = task_.settings_json();
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

  // A new run into a directory that holds an earlier attempt which never saved checkpoints/last
  // (it was killed, or failed): its metrics, curves and best checkpoint belong to that attempt,
  // and so may the task's files (the task keeps those that fit). Then options.json.
  void write_new_run_files() {
    const Json now = task_.settings_json();
    if (fs::exists(run_.options())) {
      std::error_code ec;
      for (const std::string& f : {run_.metrics(), run_.curves(), run_.best()}) fs::remove_all(f, ec);
      const std::string kept = task_.remove_attempt_leftovers(run_, now);
      progress_.message(cat(run_.root, " holds an earlier attempt that never saved a checkpoint; starting over", kept));
    }
    std::error_code ec;
    fs::create_directories(run_.checkpoints(), ec);
    QKGRAD_CHECK(!ec && fs::is_directory(run_.checkpoints()), "train: cannot create the run directory ",
                 run_.checkpoints(), ": ", ec ? ec.message() : "not a directory",
                 "; choose a --run where you may create directories");
    const std::string text = dump_json(now, 2) + "\n";
    write_file_atomically(run_.options(), [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  }

  // The weights, optimizer and loop state of checkpoints/last. A finished run stays finished: a
  // requeued job that resumes it reproduces the run that was not interrupted, instead of training
  // on (raise the budget that stopped it to do that). Returns false for a finished run.
  bool resume_state() {
    try {
      task_.load_weights(run_.last());
      s_ = from_trainer_state(load_trainer_state(run_.last()), *opt_, *schedule_, task_.dropout_generator(),
                              task_.batches_per_epoch());
    } catch (const Error& e) {
      fail(cat("train --resume: cannot continue from ", run_.last(), ": ", e.what(),
               ". It does not fit this run's options.json and data, or it is damaged: resume with the options the run "
               "was started with, or start a new --run"));
    }
    if (const std::string why = finished_because(s_, settings_, *schedule_); !why.empty()) {
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

  // Every rank starts from the same parameters; the gradients are summed over the ranks during
  // backward (distributed/gradient_reducer.h).
  void start_data_parallel() {
    require_same_as_root(comm_, Json{{"parameters", hex64(parameter_fingerprint())}, {"step", s_.step}},
                         "model state (initial or resumed parameters)");
    gradient_comm_ = distributed::gradient_communicator(model_device(), comm_);  // NCCL for CUDA gradients, where built
    distributed::Communicator& gradients = gradient_comm_ ? *gradient_comm_ : comm_;
    reducer_ = std::make_unique<distributed::GradientReducer>(gradients, params_);
    progress_.message(cat("data parallel: ", gradients.describe(), "; each takes ", settings_.accumulate, " of the ",
                          ranks_ * settings_.accumulate, " shares of every batch; gradients summed in ", reducer_->buckets(),
                          " buckets during backward; evaluation and every file on rank 0"));
  }
  Device model_device() const { return params_.empty() ? Device::cpu : params_.front().device(); }

  // The batch at the current position of the epoch order; false (and the next epoch) at its end.
  bool next_batch() {
    if (order_epoch_ != s_.epoch) {  // the permutation of an epoch, made once per epoch
      order_ = task_.epoch_order(settings_.seed, s_.epoch);
      order_epoch_ = s_.epoch;
    }
    if (s_.position >= static_cast<int64_t>(order_.size())) {
      ++s_.epoch;
      s_.position = 0;
      return false;
    }
    batch_ = task_.select_batch(order_[s_.position]);
    return true;
  }

  // One training step, the lesson: zero the gradients; forward, loss and backward; the NaN
  // guard; clip the gradient norm and update. False when the batch was skipped (--on-nan skip).
  bool step() {
    if (o_.inject_rank_death_at_step == s_.step + 1 && ranks_ > 1 && comm_.rank() == ranks_ - 1) std::raise(SIGKILL);
    const MixedPrecision policy(parse_precision(settings_.precision));  // ops/precision.h: the policy
    opt_->zero_grad();
    grad_norm_ = NAN;
    const double loss = forward_and_backward();  // the batch's mean loss per token
    if (std::isfinite(loss)) grad_norm_ = grad_norm(params_);
    if (!std::isfinite(loss) || !std::isfinite(grad_norm_)) return guard_non_finite(loss);
    opt_->set_lr(schedule_->lr(opt_->steps() + 1));
    opt_->step(clip_factor(grad_norm_, settings_.clip));  // clipping inside Adam's one pass
    check_update_finite();
    count_step(loss);
    return true;
  }

  // Forward and backward of the batch; returns its loss per token (non-finite: nothing was
  // backpropagated). With --accumulate K, or in a data-parallel job, the batch runs as
  // micro-batches: this rank's K of the ranks·K shares of its examples (rank_shares), each
  // forward and backward in turn so that their gradients add up. Each micro-batch's loss is
  // divided by the whole batch's loss tokens, so the sum over micro-batches and ranks is the
  // batch's loss per token and the gradients are the batch's (to float32 summation order). In a
  // job the ranks then agree on the loss (a NaN on any rank skips or stops the batch
  // everywhere) before this rank's last backward, during which the reducer sums the gradients
  // over the ranks.
  double forward_and_backward() {
    const double tokens = static_cast<double>(std::max<int64_t>(batch_.loss_tokens, 1));
    double loss = 0;   // this rank's part of the batch's loss; after agree_on_loss, the batch's
    Tensor last_loss;  // the last micro-batch's loss, whose backward waits for the agreement
    if (ranks_ * settings_.accumulate == 1) {
      last_loss = micro_loss(nullptr, tokens, loss);  // the common case: no split, no copy
    } else {
      const auto shares = rank_shares(batch_.indices, comm_.rank(), ranks_, settings_.accumulate);
      for (std::size_t k = 0; k < shares.size(); ++k) {
        if (shares[k].empty() || !std::isfinite(loss)) continue;
        if (last_loss.defined()) last_loss.backward();  // the previous micro-batch's
        start_micro_dropout(comm_.rank() * settings_.accumulate + static_cast<int64_t>(k));
        last_loss = micro_loss(&shares[k], tokens, loss);
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
    if (last_loss.defined()) {  // a rank may have no examples in a small batch
      reducer_ ? backward(last_loss, Tensor::ones(last_loss.shape(), last_loss.dtype(), last_loss.device()), reducer_->hook())
               : last_loss.backward();
    }
    if (reducer_) {
      reducer_->finish();  // the gradients, summed over the ranks (zeros from a rank without examples)
      window_comm_seconds_ += reducer_->last_wait_seconds();
    }
    return loss;
  }

  // The loss of one micro-batch (`share`; null: the whole batch) divided by the whole batch's
  // loss tokens; adds its value to `sum` (to the host: on a GPU this waits for the forward).
  Tensor micro_loss(const std::vector<int64_t>* share, double tokens, double& sum) {
    const uint64_t dropout_start = task_.dropout_generator().offset();
    const Tensor loss_sum = share ? task_.loss_sum(*share) : task_.loss_sum();
    QKGRAD_CHECK(ranks_ * settings_.accumulate == 1 || task_.dropout_generator().offset() - dropout_start < kMicroDropoutBlocks,
                 "train: one micro-batch drew more than 2^32 dropout blocks; use a smaller --batch-tokens");
    Tensor part = loss_sum / tokens;
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
    task_.dropout_generator().set_offset(j * kMicroDropoutBlocks);
  }

  // The counters of a step taken.
  void count_step(double loss) {
    ++s_.step;
    ++s_.position;
    s_.tokens_seen += static_cast<double>(batch_.loss_tokens);
    s_.window_loss += loss;
    ++s_.window_steps;
    window_tokens_ += static_cast<double>(batch_.tokens);
    ++timed_steps_;
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
    uint64_t hash = kFnv1aStart;
    NoGradGuard reading;  // the parameters require grad; reading their bits is no op of the tape
    for (const Tensor& p : params_) {
      const Tensor host = p.device() == Device::cpu ? p : p.to(Device::cpu);
      hash = fnv1a(std::string_view(static_cast<const char*>(host.raw_data()), host.nbytes()), hash);
    }
    return hash;
  }

  // The NaN guard: a non-finite loss or gradient never reaches the parameters or the optimizer
  // state. Skip the batch (--on-nan skip; returns false) or stop with a checkpoint of the last
  // good state (the parameters are still those from before this batch).
  bool guard_non_finite(double loss_value) {
    const std::string culprit = std::isfinite(loss_value) ? "the gradient of " + first_non_finite(*model_, params_, true) : "the loss";
    const std::string what = cat("step ", s_.step + 1, " (epoch ", s_.epoch + 1, ", batch ", s_.position,
                                 " of the epoch order, ", task_.describe_batch(batch_.indices), "): ", culprit,
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
    const std::string where = cat("step ", s_.step, "/", settings_.max_steps, " ", format_number("%3.0f", 100 * std::min(done, 1.0)), "%");
    if (!log_line) {
      progress_.live(where, done, cat("loss ", format_number("%.3f", window_mean), " | ", format_number("%.0f", tps), " tok/s | ETA ",
                                      clock_text(std::max(eta, 0.0))));
      return;
    }
    write_log_line(where, window_mean, tps, elapsed, eta);
  }

  // A line of metrics.jsonl and its log line; then a new window.
  void write_log_line(const std::string& where, double window_mean, double tps, double elapsed, double eta) {
    Json m = Json::object();
    m["step"] = s_.step;
    m["epoch"] = s_.epoch + 1;
    m["train_loss"] = window_mean;
    m["lr"] = opt_->lr();
    m["tokens_per_s"] = tps;
    m["grad_norm"] = grad_norm_;
    m["elapsed_s"] = elapsed;
    const Json extras = task_.log_extras();
    for (const auto& [key, value] : extras.items()) m[key] = value;
    const double comm_ms = 1000 * window_comm_seconds_ / static_cast<double>(std::max<int64_t>(timed_steps_, 1));
    if (ranks_ > 1) m["comm_ms_per_step"] = comm_ms;  // waiting for the other ranks (not hidden by backward)
    append_metrics(run_.metrics(), m, history_);
    progress_.log(cat(where, " | epoch ", s_.epoch + 1, " | loss ", format_number("%.3f", window_mean), " | ", format_number("%.0f", tps),
                      " tok/s | lr ", format_number("%.2e", opt_->lr()), ranks_ > 1 ? cat(" | comm ", format_number("%.1f", comm_ms), " ms/step") : "",
                      " | elapsed ", clock_text(elapsed), " | ETA ", clock_text(std::max(eta, 0.0))));
    window_start_ = Clock::now();
    window_tokens_ = 0;
    window_eval_seconds_ = 0;
    window_comm_seconds_ = 0;
    timed_steps_ = 0;
    s_.window_loss = 0;
    s_.window_steps = 0;
  }

  // The task's dev evaluation; best saved when the best metric improves, last always. True
  // when patience ends the run. In a data-parallel job rank 0 evaluates and sends the best
  // metric's value to the others, which wait.
  bool evaluate_and_save() {
    Evaluation e;
    std::vector<double> value{0};
    if (comm_.is_root()) {
      e = task_.evaluate([&](double fraction, const std::string& what) {
        progress_.live(cat("eval at step ", s_.step), fraction, what);
      });
      QKGRAD_CHECK(e.values.contains(settings_.best_metric) && e.values.at(settings_.best_metric).is_number(),
                   "train: the evaluation gives no number \"", settings_.best_metric, "\" (the best metric) among ",
                   e.values.dump());
      value[0] = e.values.at(settings_.best_metric).get<double>();
    }
    if (ranks_ > 1) comm_.broadcast(value, 0);
    schedule_->report(settings_.lower_is_better ? -value[0] : value[0], s_.step);  // higher is better
    const bool better = improves(value[0], s_.best, settings_);
    if (better) {
      s_.best = value[0];
      s_.evals_since_best = 0;
      save(run_.best(), nullptr);
    } else {
      ++s_.evals_since_best;
    }
    if (comm_.is_root()) append_evaluation(e);
    progress_.message(cat("eval at step ", s_.step, ": ", e.line,
                          better ? cat(" (best ", settings_.best_metric_label, " so far: saved)") : cat(" (", best_text(s_, settings_), ")")));
    save_last();
    if (below_stop_lr(s_, settings_, *schedule_)) {
      stop_reason_ = cat("--stop-lr (the learning rate, ", rate_text(s_, *schedule_), ", is below ", settings_.stop_lr, ")");
      return true;
    }
    if (s_.evals_since_best < settings_.patience) return false;
    stop_reason_ = cat("patience (", settings_.patience, " evaluations without a better dev ", settings_.best_metric_label, ")");
    return true;
  }
  void append_evaluation(const Evaluation& e) {
    Json m = Json::object();
    m["step"] = s_.step;
    for (const auto& [key, value] : e.values.items()) m["dev_" + key] = value;
    m["lr"] = opt_->lr();
    m["elapsed_s"] = seconds_before_ + seconds_since(start_);
    append_metrics(run_.metrics(), m, history_);
  }

  // A failed save stops the run with what to do; the checkpoint it would have replaced is
  // unchanged (io/checkpoint.h). A save is refused when the state is not finite.
  void save(const std::string& dir, const TrainerState* t) {
    if (!comm_.is_root()) return;  // rank 0 alone writes
    const std::string kept = last_saved_step_ >= 0 ? cat(run_.last(), " holds step ", last_saved_step_)
                                                   : std::string("no checkpoint was saved");
    try {
      task_.save_checkpoint(dir, t);
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
    const TrainerState t = to_trainer_state(s_, *opt_, *schedule_, task_.dropout_generator());
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

  // The last save, the curves, and how the run ended: 0, or 128 + the signal that stopped it.
  int report() {
    save_last();
    if (comm_.is_root()) task_.write_curves(run_, history_);
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

  Task& task_;
  const LoopSettings& settings_;
  const LoopOptions& o_;
  const RunDir run_;
  distributed::Communicator& comm_;
  const int ranks_;
  std::unique_ptr<distributed::Communicator> gradient_comm_;  // NCCL's, for gradients on a GPU (else comm_)
  std::unique_ptr<distributed::GradientReducer> reducer_;     // in a data-parallel job
  bool agreed_stop_ = false;          // agree_on_loss: a rank got a stop signal
  double agreed_train_seconds_ = 0;   // agree_on_loss: rank 0's training clock
  double window_comm_seconds_ = 0;    // time spent waiting for the other ranks in this log window
  Progress progress_;
  TaskContext context_;
  std::optional<RunLock> lock_;           // held until the run ends (declared before cleanup_,
  std::optional<NewRunCleanup> cleanup_;  // so that a cleanup runs while the lock is held)
  Module* model_ = nullptr;               // the task's
  std::unique_ptr<Adam> opt_;
  std::unique_ptr<LrSchedule> schedule_;
  std::vector<Tensor> params_;       // model_->parameters(), made once
  std::vector<int64_t> order_;       // the batch order of epoch order_epoch_
  int64_t order_epoch_ = -1;
  LoopState s_;
  History history_;
  BatchInfo batch_;
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

int train(Task& task, const LoopSettings& settings, const LoopOptions& options, distributed::Communicator& comm) {
  QKGRAD_CHECK(!options.run_dir.empty(), "train: --run is required");
  if (comm.size() > 1) {  // before anything is read or written: the same command on every rank
    Json same = task.settings_json();
    same["run"] = fs::absolute(options.run_dir).lexically_normal().string();
    same["resume"] = options.resume;
    same["on_nan"] = options.on_nan;
    same["inject_nan_at_step"] = options.inject_nan_at_step;
    same["inject_rank_death_at_step"] = options.inject_rank_death_at_step;
    require_same_as_root(comm, same, "options");
  }
  StopSignals stop_signals;  // from here on SIGINT, SIGTERM and SIGHUP stop the run cleanly
  const std::string program = program_invocation_short_name;
  if (comm.size() == 1) {
    // Said at once, while the step or dev evaluation in progress finishes (that can take a
    // while); on a terminal it first clears the row of the live line, which holds the echo "^C".
    StopSignals::set_note(cat(::isatty(STDERR_FILENO) == 1 ? "\r\x1b[K" : "", program,
                              " train: stopping: the step (or dev evaluation) in progress finishes, then ",
                              options.run_dir, "/checkpoints/last is saved. A second Ctrl-C stops at once, losing the steps "
                              "since the last save\n"));
  } else {
    StopSignals::set_note(cat(program, " train (rank ", comm.rank(), " of ", comm.size(),
                              "): stopping on a signal. Under mpirun this is how the job ends when a rank fails or mpirun "
                              "itself is stopped; mpirun's message names the rank. Every checkpoint in ", options.run_dir,
                              "/checkpoints is intact (each is written atomically): continue with the same command plus --resume\n"));
  }
  Trainer run(task, settings, options, comm);
  run.prepare_run_directory();
  run.load_data();
  if (!run.build_model()) return 0;  // a finished run, resumed
  return run.train_until_stopped();
}

}  // namespace qkgrad::training
