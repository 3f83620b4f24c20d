// The training harness (training/trainer.h) with a task that is not translation: a line fitted
// to points, y = w·x + b, in a few lines of ops. What it shows is what a second program (the
// decoder-only language model) gets without copying a line: the run directory and its files,
// checkpoints best/last, metrics.jsonl, exact resume, patience, --accumulate and the NaN guard.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_helpers.h"
#include "core/autograd.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "nn/module.h"
#include "ops/ops.h"
#include "training/trainer.h"

using namespace qkgrad;
using namespace qkgrad::test_cli;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  return lines;
}

// y = w·x + b: the whole model.
class Line : public Module {
 public:
  Line() {
    w = Tensor::zeros({1, 1});  // [1, 1]
    b = Tensor::zeros({1});     // [1]
    register_parameter("w", w);
    register_parameter("b", b);
  }
  Tensor forward(const Tensor& x) const { return add(matmul(x, w), b); }  // [N, 1]
  Tensor w, b;
};

// Points on y = 3x - 1; each batch 4 consecutive points, the epochs in a rotating order.
class LineTask : public training::Task {
 public:
  explicit LineTask(double dev_offset = 0) : dev_offset_(dev_offset) {}

  std::vector<std::string> files() const override { return {"points.txt"}; }
  Json settings_json() const override { return Json{{"task", "line"}, {"points", kPoints}}; }
  Json saved_settings(const std::string& path) const override { return parse_json(read_file(path, 1 << 20), path); }
  bool fixed_on_resume(const std::string& key) const override { return key == "points"; }
  std::string remove_attempt_leftovers(const training::RunDir&, const Json&) override { return ""; }

  void read_data(training::TaskContext&) override {}
  Json data_fingerprint() const override { return Json{{"points", kPoints}}; }
  void make_files(training::TaskContext& c) override { write(c.run.file("points.txt"), "y = 3x - 1\n"); }
  void prepare_data(training::TaskContext&) override {}
  Module& build_model(training::TaskContext&) override { return model_; }
  std::string describe_model() const override { return "model: a line"; }
  std::string describe_batches() const override { return "8 batches of 4 points"; }
  std::string describe_evaluation() const override { return "the dev loss"; }
  Generator& dropout_generator() override { return dropout_; }
  void save_checkpoint(const std::string& dir, const TrainerState* trainer) override {
    qkgrad::save_checkpoint(dir, Json{{"kind", "line"}}, model_.named_parameters(), trainer);
  }
  void load_weights(const std::string& dir) override {
    load_model_weights(dir, model_.named_parameters(), [](const Json& config) {
      QKGRAD_CHECK(config.value("kind", "") == "line", "not a line's checkpoint");
    });
  }

  int64_t batches_per_epoch() const override { return kPoints / 4; }
  std::vector<int64_t> epoch_order(uint64_t, int64_t epoch) const override {
    std::vector<int64_t> order;
    for (int64_t i = 0; i < batches_per_epoch(); ++i) order.push_back((i + epoch) % batches_per_epoch());
    return order;
  }
  training::BatchInfo select_batch(int64_t group) override {
    batch_.clear();
    for (int64_t i = 0; i < 4; ++i) batch_.push_back(group * 4 + i);
    return training::BatchInfo{batch_, 4, 4};
  }
  Tensor loss_sum() override { return loss_sum(batch_); }
  Tensor loss_sum(const std::vector<int64_t>& share) override {
    std::vector<double> x, y;
    for (const int64_t i : share) {
      x.push_back(static_cast<double>(i) / kPoints);
      y.push_back(3 * x.back() - 1);
    }
    const auto n = static_cast<int64_t>(share.size());
    const Tensor error = sub(model_.forward(Tensor::from_vector(x, {n, 1})), Tensor::from_vector(y, {n, 1}));  // [n, 1]
    return sum(mul(error, error));
  }
  std::string describe_batch(const std::vector<int64_t>& indices) const override {
    return cat(indices.size(), " points from point ", indices.front());
  }

  training::Evaluation evaluate(const std::function<void(double, const std::string&)>&) override {
    NoGradGuard no_grad;
    std::vector<int64_t> all;
    for (int64_t i = 0; i < kPoints; ++i) all.push_back(i);
    const double loss = loss_sum(all).item() / kPoints + dev_offset_;
    training::Evaluation e;
    e.values["loss"] = loss;
    e.line = cat("dev loss ", loss);
    return e;
  }
  void write_curves(const training::RunDir& run, const training::History& history) const override {
    write(run.curves(), cat(history.series("train_loss").size(), " training points\n"));
  }

  Line model_;

 private:
  static constexpr int64_t kPoints = 32;
  double dev_offset_;
  Generator dropout_{7};
  std::vector<int64_t> batch_;
};

training::LoopSettings line_settings(int64_t steps) {
  training::LoopSettings s;
  s.max_steps = steps;
  s.eval_every = 8;
  s.log_every = 4;
  s.lr = 0.1;
  s.schedule = "plateau";  // its state is in the checkpoint (cosine's end would move with a shorter budget)
  return s;
}

int run_line(LineTask& task, const training::LoopSettings& s, const std::string& run, bool resume = false) {
  const auto one = distributed::single_process();
  training::LoopOptions o;
  o.run_dir = run;
  o.resume = resume;
  return training::train(task, s, o, *one);
}

std::vector<double> weights(const LineTask& task) { return {task.model_.w.item(), task.model_.b.item()}; }

}  // namespace

TEST_CASE("training harness: a task that is not translation trains, records and saves in its run directory", "[training]") {
  TempDir tmp;
  LineTask task;
  REQUIRE(run_line(task, line_settings(96), tmp / "run") == 0);
  for (const char* f : {"options.json", "points.txt", "metrics.jsonl", "curves.svg", "checkpoints/best/model.safetensors",
                        "checkpoints/last/trainer.safetensors"}) {
    CHECK(fs::exists(tmp / "run/" + f));
  }
  std::vector<double> dev;
  int64_t train_lines = 0;
  for (const std::string& line : split_lines(read(tmp / "run/metrics.jsonl"))) {
    const Json j = parse_json(line, "metrics.jsonl");
    if (j.contains("dev_loss")) dev.push_back(j.at("dev_loss").get<double>());
    train_lines += j.contains("train_loss") ? 1 : 0;
  }
  REQUIRE(dev.size() == 12);
  CHECK(dev.back() < dev.front() / 10);  // it learns the line
  CHECK(train_lines == 24);
  CHECK(read(tmp / "run/curves.svg") == "24 training points\n");
  // A new run beside another program's files is refused, naming them; the task's own are fine.
  fs::create_directories(tmp / "notes");
  write(tmp / "notes/draft.tex", "x");
  CHECK_THROWS_WITH(run_line(task, line_settings(8), tmp / "notes"), Contains("holds files that are not a training run's (draft.tex)"));
  fs::create_directories(tmp / "own");
  write(tmp / "own/points.txt", "y = 3x - 1\n");
  LineTask fresh;
  CHECK(run_line(fresh, line_settings(8), tmp / "own") == 0);
}

TEST_CASE("training harness: a stopped and resumed run ends bit for bit where an uninterrupted one does", "[training]") {
  TempDir tmp;
  LineTask whole;
  REQUIRE(run_line(whole, line_settings(40), tmp / "whole") == 0);
  LineTask first, second;
  training::LoopSettings part = line_settings(40);
  part.max_steps = 20;  // a budget cut short, as a signal or --max-minutes would
  REQUIRE(run_line(first, part, tmp / "parts") == 0);
  REQUIRE(run_line(second, line_settings(40), tmp / "parts", true) == 0);
  CHECK(weights(second) == weights(whole));
  CHECK(weights(second) != weights(first));
  // A finished run stays finished.
  LineTask third;
  CHECK(run_line(third, line_settings(40), tmp / "parts", true) == 0);
  CHECK(weights(third) == weights(whole));
}

TEST_CASE("training harness: --accumulate splits a batch into micro-batches with the same update", "[training]") {
  TempDir tmp;
  LineTask one, two;
  training::LoopSettings s = line_settings(16);
  REQUIRE(run_line(one, s, tmp / "one") == 0);
  s.accumulate = 2;
  REQUIRE(run_line(two, s, tmp / "two") == 0);
  CHECK(weights(two)[0] == Approx(weights(one)[0]).epsilon(1e-5));
  CHECK(weights(two)[1] == Approx(weights(one)[1]).epsilon(1e-5));
}

// A dev loss that never moves: every evaluation after the first is a stall.
class FlatDevTask : public LineTask {
 public:
  training::Evaluation evaluate(const std::function<void(double, const std::string&)>&) override {
    training::Evaluation e;
    e.values["loss"] = 1.0;
    e.line = "dev loss 1";
    return e;
  }
};

TEST_CASE("training harness: --stop-lr ends a plateau run once the rate is cut below it; no cut during the warmup",
          "[training]") {
  TempDir tmp;
  FlatDevTask task;
  training::LoopSettings s = line_settings(400);
  s.warmup = 24;
  s.stop_lr = 0.07;  // 0.1 -> 0.08 -> 0.064: the second cut stops it
  REQUIRE(run_line(task, s, tmp / "flat") == 0);
  // Evaluations every 8 steps: 8 sets the best, 16 is in the warmup (no stall), 24-40 are three
  // stalls (x0.8), 48-64 three more (x0.8 again, 0.064 < 0.07). Counting 16 would stop at 56.
  const std::string metrics = read(tmp / "flat/metrics.jsonl");
  const Json last = parse_json(split_lines(metrics).back(), "metrics.jsonl");
  CHECK(last.at("step").get<int64_t>() == 64);
  CHECK(last.at("lr").get<double>() == Approx(0.08));  // the rate of update 64, before the cut
  // A resumed run that stopped on it stays stopped.
  FlatDevTask again;
  REQUIRE(run_line(again, s, tmp / "flat", true) == 0);
  CHECK(read(tmp / "flat/metrics.jsonl") == metrics);
}

TEST_CASE("training harness: patience ends a run whose dev value stops improving; the NaN guard names the batch",
          "[training]") {
  TempDir tmp;
  LineTask task;
  training::LoopSettings s = line_settings(400);
  s.lr = 0;  // nothing is learnt: the dev loss never improves after the first evaluation
  s.patience = 2;
  REQUIRE(run_line(task, s, tmp / "flat") == 0);
  const std::vector<std::string> lines = split_lines(read(tmp / "flat/metrics.jsonl"));
  CHECK(parse_json(lines.back(), "metrics.jsonl").at("step").get<int64_t>() == 24);  // 3 evaluations, every 8 steps
  LineTask guarded;
  training::LoopOptions o;
  o.run_dir = tmp / "nan";
  o.inject_nan_at_step = 3;
  const auto single = distributed::single_process();
  CHECK_THROWS_WITH(training::train(guarded, line_settings(8), o, *single),
                    Contains("step 3 (epoch 1, batch 2 of the epoch order, 4 points from point 8): the loss is not finite"));
  // A best metric the task's evaluation does not give is named at the first evaluation.
  LineTask unnamed;
  training::LoopSettings by_bleu = line_settings(8);
  by_bleu.best_metric = "bleu";
  CHECK_THROWS_WITH(run_line(unnamed, by_bleu, tmp / "bleu"),
                    Contains("the evaluation gives no number \"bleu\" (the best metric) among {\"loss\":"));
}
