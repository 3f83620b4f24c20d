#include "nn/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.h"

namespace qkgrad {

namespace {
void check_rate(const char* who, double lr) {
  QKGRAD_CHECK(std::isfinite(lr) && lr >= 0, who, ": the learning rate must be finite and >= 0, got ", lr);
}
// The warmup ramp: step/warmup for step <= warmup (step 1 gets peak/warmup), 1 after.
double ramp(int64_t step, int64_t warmup) {
  if (warmup <= 0 || step >= warmup) return 1.0;
  return static_cast<double>(std::max<int64_t>(step, 1)) / static_cast<double>(warmup);
}
}  // namespace

ConstantLr::ConstantLr(double lr) : lr_(lr) { check_rate("ConstantLr", lr); }
double ConstantLr::lr(int64_t) const { return lr_; }
std::string ConstantLr::describe() const { return cat("constant ", lr_); }

InverseSqrtLr::InverseSqrtLr(double peak, int64_t warmup) : peak_(peak), warmup_(warmup) {
  check_rate("InverseSqrtLr", peak);
  QKGRAD_CHECK(warmup >= 1, "InverseSqrtLr: warmup must be >= 1 step, got ", warmup);
}
double InverseSqrtLr::lr(int64_t step) const {
  if (step <= warmup_) return peak_ * ramp(step, warmup_);
  return peak_ * std::sqrt(static_cast<double>(warmup_) / static_cast<double>(step));
}
std::string InverseSqrtLr::describe() const { return cat("linear warmup to ", peak_, " over ", warmup_, " steps, then inverse square root"); }

PlateauLr::PlateauLr(double peak, int64_t warmup, double factor, int patience, PlateauRule rule)
    : peak_(peak), factor_(factor), warmup_(warmup), patience_(patience), rule_(rule) {
  check_rate("PlateauLr", peak);
  QKGRAD_CHECK(warmup >= 0, "PlateauLr: warmup must be >= 0, got ", warmup);
  QKGRAD_CHECK(factor > 0 && factor <= 1, "PlateauLr: factor must be in (0, 1], got ", factor);
  QKGRAD_CHECK(patience >= 1, "PlateauLr: patience must be >= 1, got ", patience);
}
double PlateauLr::lr(int64_t step) const { return peak_ * scale_ * ramp(step, warmup_); }
void PlateauLr::report(double score, int64_t step) {
  // Both rules' records are kept whichever rule is in use, so that a resume may switch rules.
  const bool improved = score > best_;
  const bool declined = static_cast<int>(recent_.size()) == patience_ &&
                        score < *std::min_element(recent_.begin(), recent_.end());
  best_ = std::max(best_, score);
  if (improved) {
    bad_reports_ = 0;
  } else if (step >= warmup_) {
    ++bad_reports_;  // no stall while the rate still rises
  }
  recent_.push_back(score);
  if (static_cast<int>(recent_.size()) > patience_) recent_.pop_front();
  if (step < warmup_) return;
  if (rule_ == PlateauRule::decline ? declined : bad_reports_ >= patience_) {
    scale_ *= factor_;
    bad_reports_ = 0;
  }
}
std::map<std::string, double> PlateauLr::state() const {
  std::map<std::string, double> s = {{"scale", scale_}, {"best", best_}, {"bad_reports", static_cast<double>(bad_reports_)},
                                     {"recent_reports", static_cast<double>(recent_.size())}};
  for (std::size_t i = 0; i < recent_.size(); ++i) s[cat("recent_", i)] = recent_[i];
  return s;
}
void PlateauLr::load_state(const std::map<std::string, double>& s) {
  for (const char* key : {"scale", "best", "bad_reports"}) {
    QKGRAD_CHECK(s.count(key), "PlateauLr: the saved schedule state lacks '", key, "'");
  }
  scale_ = s.at("scale");
  best_ = s.at("best");
  bad_reports_ = static_cast<int>(s.at("bad_reports"));
  // A checkpoint from before the decline rule has no recent reports: the window fills again.
  recent_.clear();
  const double recent = s.count("recent_reports") ? s.at("recent_reports") : 0;
  QKGRAD_CHECK(recent >= 0 && recent <= 1e6, "PlateauLr: the saved schedule state has ", recent, " recent reports");
  for (int64_t i = 0; i < static_cast<int64_t>(recent); ++i) {
    const std::string key = cat("recent_", i);
    QKGRAD_CHECK(s.count(key), "PlateauLr: the saved schedule state lacks '", key, "'");
    recent_.push_back(s.at(key));
  }
  while (static_cast<int>(recent_.size()) > patience_) recent_.pop_front();
}
std::string PlateauLr::describe() const {
  return cat("linear warmup to ", peak_, " over ", warmup_, " steps, then flat, x", factor_,
             rule_ == PlateauRule::decline ? cat(" when a validation is below each of the ", patience_, " before it")
                                           : cat(" after ", patience_, " validations without improvement"));
}

CosineLr::CosineLr(double peak, int64_t warmup, int64_t total, double floor)
    : peak_(peak), floor_(floor), warmup_(warmup), total_(total) {
  check_rate("CosineLr", peak);
  check_rate("CosineLr", floor);
  QKGRAD_CHECK(warmup >= 0 && total > warmup, "CosineLr: need 0 <= warmup < total, got ", warmup, " and ", total);
}
double CosineLr::lr(int64_t step) const {
  if (step <= warmup_) return peak_ * ramp(step, warmup_);
  const double progress = std::min(1.0, static_cast<double>(step - warmup_) / static_cast<double>(total_ - warmup_));
  return floor_ + (peak_ - floor_) * 0.5 * (1 + std::cos(std::numbers::pi * progress));
}
std::string CosineLr::describe() const {
  return cat("linear warmup to ", peak_, " over ", warmup_, " steps, then cosine to ", floor_, " at step ", total_);
}

}  // namespace qkgrad
