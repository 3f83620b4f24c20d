// Learning-rate schedules. lr(step) is the rate for update number `step` (1-based, the value of
// Optimizer::steps() after the update). Schedules that react to validation scores keep a small
// state, exported as name -> number for checkpoints.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

namespace qkgrad {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual double lr(int64_t step) const = 0;
  // A validation score (higher is better, e.g. BLEU) measured after update `step`; only plateau
  // schedules use it.
  virtual void report(double score, int64_t step) { (void)score, (void)step; }
  virtual std::map<std::string, double> state() const { return {}; }
  virtual void load_state(const std::map<std::string, double>& state) { (void)state; }
  virtual std::string describe() const = 0;
};

// lr = peak for every step.
class ConstantLr : public LrSchedule {
 public:
  explicit ConstantLr(double lr);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double lr_;
};

// Linear warmup to `peak` over `warmup` steps, then peak · √(warmup / step) (Vaswani et al.).
class InverseSqrtLr : public LrSchedule {
 public:
  InverseSqrtLr(double peak, int64_t warmup);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double peak_;
  int64_t warmup_;
};

// When PlateauLr multiplies the rate by its factor, after a report:
//   stall    the best has not improved for `patience` reports in a row (then it counts afresh);
//   decline  the report is below each of the `patience` reports before it: a drop, not a lack of
//            progress (the rule of the paper's code, CyndxAI/QKNorm controller.py).
enum class PlateauRule { stall, decline };

// Linear warmup to `peak`, then flat; the rate is multiplied by `factor` (the paper: 0.8, with
// `patience` 3) whenever `rule` says the reported scores have stopped improving. Reports during
// the warmup count towards the best and the window of recent reports but never cut: the rate is
// still rising (the paper's code does not anneal during warmup either).
class PlateauLr : public LrSchedule {
 public:
  PlateauLr(double peak, int64_t warmup, double factor = 0.8, int patience = 3, PlateauRule rule = PlateauRule::stall);
  double lr(int64_t step) const override;
  void report(double score, int64_t step) override;
  std::map<std::string, double> state() const override;
  void load_state(const std::map<std::string, double>& state) override;
  std::string describe() const override;
  double scale() const { return scale_; }

 private:
  double peak_, factor_;
  int64_t warmup_;
  int patience_;
  PlateauRule rule_;
  double scale_ = 1.0;
  double best_ = -1e300;
  int bad_reports_ = 0;         // stall: reports since the best improved
  std::deque<double> recent_;   // decline: the last `patience` reports, oldest first
};

// Linear warmup to `peak`, then a cosine decay to `floor` at `total` steps (flat after).
class CosineLr : public LrSchedule {
 public:
  CosineLr(double peak, int64_t warmup, int64_t total, double floor = 0.0);
  double lr(int64_t step) const override;
  std::string describe() const override;

 private:
  double peak_, floor_;
  int64_t warmup_, total_;
};

}  // namespace qkgrad
