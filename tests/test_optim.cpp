// Optimizers, gradient clipping and learning-rate schedules against hand-computed values.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>

#include "core/autograd.h"
#include "core/error.h"
#include "nn/optim.h"
#include "nn/schedule.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {
Tensor param(std::vector<double> v) {
  return Tensor::from_vector(v, {static_cast<int64_t>(v.size())}, DType::f64).requires_grad_();
}
void set_grad(Tensor& p, std::vector<double> g) {
  p.clear_grad();
  sum(p * Tensor::from_vector(g, {static_cast<int64_t>(g.size())}, DType::f64)).backward();
}
}  // namespace

TEST_CASE("Adam follows its update rule step by step", "[optim]") {
  Tensor p = param({1.0, -2.0});
  AdamOptions o;
  o.lr = 0.1;
  Adam adam({{"p", p}}, o);
  double m = 0, v = 0, x = 1.0;
  for (int t = 1; t <= 3; ++t) {
    const double g = 0.5 * t;
    set_grad(p, {g, g});
    adam.step();
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    x -= 0.1 * (m / (1 - std::pow(0.9, t))) / (std::sqrt(v / (1 - std::pow(0.999, t))) + 1e-8);
    CHECK(p.at({0}) == Approx(x).epsilon(1e-12));
  }
  CHECK(adam.steps() == 3);
  CHECK(adam.state_tensors().size() == 2);
  CHECK(adam.state_tensors()[0].first == "exp_avg.p");
}

TEST_CASE("AdamW decays weights directly, except for excluded names; L2 Adam adds to the gradient", "[optim]") {
  Tensor w = param({2.0}), b = param({2.0});
  Adam adamw_opt({{"layer.weight", w}, {"layer.bias", b}}, adamw(0.1, 0.5, {"bias"}));
  set_grad(w, {0.0});
  set_grad(b, {0.0});
  adamw_opt.step();
  CHECK(w.at({0}) == Approx(2.0 - 0.1 * 0.5 * 2.0));  // zero gradient: only the decay moves it
  CHECK(b.at({0}) == 2.0);                            // excluded
  Tensor c = param({2.0});
  AdamOptions l2;
  l2.lr = 0.1;
  l2.weight_decay = 0.5;
  Adam coupled({{"c", c}}, l2);
  set_grad(c, {0.0});
  coupled.step();
  CHECK(c.at({0}) == Approx(2.0 - 0.1).epsilon(1e-6));  // g = 0.5·2 = 1, Adam's first step is lr·sign
}

TEST_CASE("SGD with momentum", "[optim]") {
  Tensor p = param({1.0});
  SGD sgd(std::vector<Tensor>{p}, 0.1, 0.5);
  set_grad(p, {1.0});
  sgd.step();  // v = 1, p = 0.9
  set_grad(p, {1.0});
  sgd.step();  // v = 1.5, p = 0.75
  CHECK(p.at({0}) == Approx(0.75));
  CHECK(sgd.state_tensors()[0].first == "velocity.param.0");
}

TEST_CASE("clip_grad_norm scales all gradients together to the max norm", "[optim]") {
  Tensor a = param({0, 0}), b = param({0});
  set_grad(a, {3, 0});
  set_grad(b, {4});
  CHECK(clip_grad_norm({a, b}, 1.0) == Approx(5.0));
  CHECK(a.grad().at({0}) == Approx(0.6).epsilon(1e-6));
  CHECK(b.grad().at({0}) == Approx(0.8).epsilon(1e-6));
  CHECK(clip_grad_norm({a, b}, 10.0) == Approx(1.0).epsilon(1e-6));  // below the max: unchanged
  CHECK(b.grad().at({0}) == Approx(0.8).epsilon(1e-6));
  set_grad(b, {NAN});
  CHECK(std::isnan(clip_grad_norm({a, b}, 1.0)));  // reported, not hidden
}

TEST_CASE("clipping folded into the update equals clipping the gradients first, bit for bit", "[optim]") {
  // float32, as training runs: the factor is applied to each gradient inside Adam's (and SGD's)
  // one pass, which must round exactly as a separate scaling pass followed by the update.
  auto make = [] {
    return Tensor::from_vector(std::vector<double>{0.5, -1.25, 2.0, 0.003}, {4}, DType::f32).requires_grad_();
  };
  auto grads = [](Tensor& p, double k) {
    p.clear_grad();
    sum(p * Tensor::from_vector(std::vector<double>{3.1 * k, -0.7, 2.9, k}, {4}, DType::f32)).backward();
  };
  for (const bool use_sgd : {false, true}) {
    Tensor folded = make(), separate = make();
    std::unique_ptr<Optimizer> a, b;
    if (use_sgd) {
      a = std::make_unique<SGD>(std::vector<Tensor>{folded}, 0.1, 0.9, 0.01);
      b = std::make_unique<SGD>(std::vector<Tensor>{separate}, 0.1, 0.9, 0.01);
    } else {
      a = std::make_unique<Adam>(std::vector<NamedTensor>{{"p", folded}}, adamw(0.01, 0.1));
      b = std::make_unique<Adam>(std::vector<NamedTensor>{{"p", separate}}, adamw(0.01, 0.1));
    }
    for (int t = 1; t <= 4; ++t) {
      grads(folded, t);
      grads(separate, t);
      const double norm = grad_norm({folded});
      CHECK(clip_grad_norm({separate}, 1.5) == norm);
      CHECK(clip_factor(norm, 1.5) < 1.0);  // it clips
      a->step(clip_factor(norm, 1.5));
      b->step();
      for (int64_t i = 0; i < 4; ++i) CHECK(folded.at({i}) == separate.at({i}));
    }
    CHECK(folded.grad().at({1}) == Approx(-0.7));  // folded: the gradient itself is left as it was
  }
  CHECK(clip_factor(0.5, 1.0) == 1.0);
  CHECK(clip_factor(NAN, 1.0) == 1.0);  // the caller's NaN guard sees the norm itself
  CHECK_THROWS_WITH(clip_factor(1.0, 0.0), Contains("max_norm must be > 0"));
}

TEST_CASE("learning-rate schedules", "[optim]") {
  const InverseSqrtLr inv(1e-3, 100);
  CHECK(inv.lr(1) == Approx(1e-5));
  CHECK(inv.lr(50) == Approx(5e-4));
  CHECK(inv.lr(100) == Approx(1e-3));
  CHECK(inv.lr(400) == Approx(5e-4));
  const CosineLr cos(1.0, 10, 110, 0.1);
  CHECK(cos.lr(10) == Approx(1.0));
  CHECK(cos.lr(60) == Approx(0.55));
  CHECK(cos.lr(110) == Approx(0.1));
  CHECK(cos.lr(500) == Approx(0.1));
  CHECK(ConstantLr(0.3).lr(7) == 0.3);

  PlateauLr plateau(1.0, 4, 0.8, 3);
  CHECK(plateau.lr(2) == Approx(0.5));
  for (double bleu : {10.0, 10.0, 10.0}) plateau.report(bleu, 3);  // during the warmup: no stall counted
  CHECK(plateau.lr(100) == Approx(1.0));
  for (double bleu : {12.0, 11.0, 12.0, 11.5}) plateau.report(bleu, 10);  // 3 without improving
  CHECK(plateau.lr(100) == Approx(0.8));
  plateau.report(13.0, 20);
  plateau.report(12.0, 30);
  PlateauLr restored(1.0, 4, 0.8, 3);
  restored.load_state(plateau.state());
  restored.report(12.0, 40);
  restored.report(12.0, 50);  // the third non-improvement since 13.0 carries over
  CHECK(restored.lr(100) == Approx(0.64));
  CHECK_THROWS_WITH(PlateauLr(1.0, 4, 1.5, 3), Contains("factor must be in (0, 1]"));
  CHECK_THROWS_WITH(restored.load_state({{"scale", 1}, {"best", 0}, {"bad_reports", 0}, {"recent_reports", 2}, {"recent_0", 1}}),
                    Contains("lacks 'recent_1'"));
}

TEST_CASE("the decline rule cuts the rate on a drop below each of the 3 evaluations before it, as the paper's code",
          "[optim]") {
  PlateauLr decline(1.0, 4, 0.8, 3, PlateauRule::decline);
  for (double bleu : {5.0, 9.0, 8.0}) decline.report(bleu, 3);  // the warmup: they fill the window
  decline.report(4.0, 3);  // below each of 5, 9, 8, but the rate still rises: no cut
  CHECK(decline.lr(100) == Approx(1.0));
  // Never a new best, but never below all three before it either: the stall rule would have cut twice.
  for (double bleu : {6.0, 7.0, 6.5, 6.8, 6.6, 6.7}) decline.report(bleu, 10);
  CHECK(decline.lr(100) == Approx(1.0));
  decline.report(6.3, 20);  // below 6.8, 6.6 and 6.7: a cut
  CHECK(decline.lr(100) == Approx(0.8));
  decline.report(6.35, 30);  // not below 6.3: the window is not reset by a cut
  CHECK(decline.lr(100) == Approx(0.8));
  // The window survives a checkpoint; a resume may switch between the rules.
  PlateauLr restored(1.0, 4, 0.8, 3, PlateauRule::decline);
  restored.load_state(decline.state());
  restored.report(6.2, 40);  // below 6.7, 6.3 and 6.35
  CHECK(restored.lr(100) == Approx(0.64));
  PlateauLr stall(1.0, 4, 0.8, 3, PlateauRule::stall);
  stall.load_state(decline.state());  // its cut carries over
  CHECK(stall.lr(100) == Approx(0.8));
  // A checkpoint from before the rule (no window): the window fills again before any cut.
  PlateauLr old(1.0, 4, 0.8, 3, PlateauRule::decline);
  old.load_state({{"scale", 1.0}, {"best", 9.0}, {"bad_reports", 0.0}});
  for (double bleu : {3.0, 2.0, 1.0}) old.report(bleu, 50);
  CHECK(old.lr(100) == Approx(1.0));
  old.report(0.5, 60);
  CHECK(old.lr(100) == Approx(0.8));
  CHECK_THROWS_WITH(InverseSqrtLr(1.0, 0), Contains("warmup must be >= 1"));
}

TEST_CASE("optimizer errors", "[optim][errors]") {
  Tensor p = param({1.0});
  CHECK_THROWS_WITH(Adam({{"p", p}, {"p", p}}, AdamOptions{}), Contains("two parameters are named 'p'"));
  CHECK_THROWS_WITH(SGD(std::vector<Tensor>{Tensor::ones({1})}, 0.1), Contains("must be a leaf tensor that requires grad"));
  Adam adam({{"p", p}}, AdamOptions{});
  CHECK_THROWS_WITH(adam.load_state({}, 3), Contains("the checkpoint has 0 state tensors but this optimizer has 2"));
  CHECK_THROWS_WITH(adam.set_lr(NAN), Contains("learning rate must be finite"));
}
