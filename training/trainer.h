// The training harness: one training run, phase by phase, for any program that plugs in a Task.
//
//   prepare the run directory (locked; new, or resumed with the same options)
//   -> the task loads its data (and makes its own files: qkgrad-translate's subwords)
//   -> the task builds its model; the harness its optimizer (Adam) and learning-rate schedule,
//      or their saved state on --resume
//   -> step, log, evaluate and save until a budget (steps, minutes), patience or a signal
//      stops it; the curves and how it ended.
//
// The harness owns everything that is not the task's: the run directory and its lock, stop
// signals, budgets, the evaluation schedule, checkpoints (best, last, step-N; exact resume),
// metrics.jsonl, the progress display, data-parallel ranks and --accumulate. A task says how to
// read its data, build its model, make its batches, compute their loss and evaluate.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "distributed/communicator.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "training/metrics.h"
#include "training/progress.h"
#include "training/run_dir.h"

namespace qkgrad::training {

// The harness's settings: budgets, the evaluation, log and save schedule, the optimizer recipe.
struct LoopSettings {
  int64_t max_steps = 1000;
  double max_minutes = 0;          // 0: no time budget
  int64_t patience = 10;           // evaluations without a better best_metric
  double stop_lr = 0;              // stop at an evaluation after warmup once the rate is below this (0: never)
  int64_t eval_every = 500, log_every = 100;
  int64_t save_every = 0;          // checkpoints/last between evaluations too (0: at evaluations only)
  int64_t keep_last = 0;           // model-only checkpoints/step-N kept, the newest K (0: none)
  int64_t accumulate = 1;          // micro-batches per batch on each rank
  double lr = 3e-4, clip = 1.0;    // the peak learning rate; the gradient norm's clip (0: none)
  // Adam's betas, epsilon and weight decay (decoupled: AdamW); its lr is the schedule's.
  AdamOptions adam;
  int64_t warmup = 0;
  // plateau (x0.8 after 3 evaluations without a better best), decline (x0.8 when an evaluation is
  // below each of the 3 before it), cosine, inverse_sqrt
  std::string schedule = "plateau";
  std::string precision = "f32";     // f32 or bf16 (ops/precision.h)
  uint64_t seed = 0;                 // the batch order's
  // The evaluation value that picks checkpoints/best, counts patience and drives the plateau
  // schedule: its key in Evaluation::values, its name in messages, and which way is better.
  // It must be >= 0 (a loss, a score): -1 marks "no evaluation yet" in the trainer state.
  std::string best_metric = "loss", best_metric_label = "loss";
  bool lower_is_better = true;
};

// The loop settings every program's settings struct has under the same names (the budgets, the
// checkpoints, the schedule, the precision, the seed); the program sets the rest itself.
template <typename Settings>
LoopSettings shared_loop_settings(const Settings& s) {
  LoopSettings l;
  l.max_steps = s.max_steps;
  l.max_minutes = s.max_minutes;
  l.patience = s.patience;
  l.stop_lr = s.stop_lr;
  l.eval_every = s.eval_every;
  l.log_every = s.log_every;
  l.save_every = s.save_every;
  l.keep_last = s.keep_last;
  l.accumulate = s.accumulate;
  l.lr = s.lr;
  l.clip = s.clip;
  l.warmup = s.warmup;
  l.schedule = s.schedule;
  l.precision = s.precision;
  l.seed = static_cast<uint64_t>(s.seed);
  return l;
}

// What one command asks of the harness beyond the run's settings.
struct LoopOptions {
  std::string run_dir;
  bool resume = false;
  std::string on_nan = "stop";  // stop (save the last good state, exit 1) or skip (the batch)
  int64_t inject_nan_at_step = 0;         // tests of the NaN guard: this step's loss is NaN (0: never)
  int64_t inject_rank_death_at_step = 0;  // tests of a rank's death: the last rank dies (0: never)
};

// A dev evaluation: its numbers by name, in the order metrics.jsonl records them ("dev_" + key),
// and the line that shows them.
struct Evaluation {
  Json values = Json::object();
  std::string line;
};

// The batch the harness asked for, as far as the harness needs to know it.
struct BatchInfo {
  std::vector<int64_t> indices;  // the examples in it (split into the ranks' and micro-batches' shares)
  int64_t loss_tokens = 0;       // the loss is a mean over these (non-pad targets)
  int64_t tokens = 0;            // counted for tokens/s (source and target)
};

// What the harness hands a task while it loads its data.
struct TaskContext {
  const RunDir& run;
  bool resume;
  distributed::Communicator& comm;
  Progress& progress;
  // Throws Interrupted after a stop signal: "interrupted by SIGTERM while <doing>; nothing was saved".
  std::function<void(const std::string& doing)> check_signal;
};

class Task {
 public:
  virtual ~Task() = default;

  // ---- the run directory ----
  // The names (or name prefixes) of the task's files at the top of the run directory.
  virtual std::vector<std::string> files() const = 0;
  // The run's settings as options.json holds them; and, read back from options.json, those of
  // an earlier start of this run (older files brought up to date).
  virtual Json settings_json() const = 0;
  virtual Json saved_settings(const std::string& options_path) const = 0;
  // Whether a setting must stay as it was on --resume (what defines the model, data and order).
  virtual bool fixed_on_resume(const std::string& key) const = 0;
  // A new run into a directory with an earlier attempt that never saved a checkpoint: the task's
  // files of that attempt that do not fit the run's settings `now` are removed. Returns what
  // the harness says about it, e.g. " (keeping its subwords, trained with the same options)".
  virtual std::string remove_attempt_leftovers(const RunDir& run, const Json& now) = 0;

  // ---- the data and the model ----
  // Reads and checks the data (nothing written yet); its fingerprint is compared across ranks.
  virtual void read_data(TaskContext& context) = 0;
  virtual Json data_fingerprint() const = 0;
  // Rank 0 makes the task's files (after options.json exists), then every rank prepares its data.
  virtual void make_files(TaskContext& context) = 0;
  virtual void prepare_data(TaskContext& context) = 0;
  virtual Module& build_model(TaskContext& context) = 0;
  virtual std::string describe_model() const = 0;       // "model: N parameters, ..."
  virtual std::string describe_batches() const = 0;     // "B batches of <= T tokens per epoch"
  virtual std::string describe_evaluation() const = 0;  // what an evaluation computes, on what
  virtual Generator& dropout_generator() = 0;
  virtual void save_checkpoint(const std::string& dir, const TrainerState* trainer) = 0;
  virtual void load_weights(const std::string& dir) = 0;

  // ---- the batches and the loss ----
  virtual int64_t batches_per_epoch() const = 0;
  virtual std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch) const = 0;
  // Makes batch number `group` of the plan the current one.
  virtual BatchInfo select_batch(int64_t group) = 0;
  // The loss summed over the current batch's tokens, or over the examples `share` of it.
  virtual Tensor loss_sum() = 0;
  virtual Tensor loss_sum(const std::vector<int64_t>& share) = 0;
  // "N sentence pairs starting with training pair I": a batch named in an error.
  virtual std::string describe_batch(const std::vector<int64_t>& indices) const = 0;

  // ---- evaluation and the record ----
  // `shown(fraction, what)` is told how far the evaluation is (the live line moves meanwhile).
  virtual Evaluation evaluate(const std::function<void(double, const std::string&)>& shown) = 0;
  // Numbers added to each log line of metrics.jsonl (e.g. the attention gains, {"g": {...}}).
  virtual Json log_extras() const { return Json::object(); }
  virtual void write_curves(const RunDir& run, const History& history) const = 0;
};

// Runs the whole training of `task` as one rank of `comm` (a single process: a communicator of
// one); returns the process exit status: 0, or 128 + the signal that stopped it.
int train(Task& task, const LoopSettings& settings, const LoopOptions& options, distributed::Communicator& comm);

}  // namespace qkgrad::training
