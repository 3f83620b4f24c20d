#include "mlp/spirals.h"

#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "core/tensor.h"
#include "nn/optim.h"
#include "ops/ops.h"

namespace qkgrad::examples {

namespace {

struct Dataset {
  Tensor x;                 // [N, 2] point coordinates
  Tensor one_hot;           // [N, K] 1 at each point's class
  std::vector<int> labels;  // [N]
};

// Class k's points lie on the arm r -> (r sin t, r cos t), t = 4k + 4r (+ noise), r in [0, 1].
Dataset make_spirals(const SpiralsConfig& c, Generator& gen) {
  const int n = c.classes * c.points_per_class;
  std::vector<double> xs(static_cast<std::size_t>(n) * 2), hot(static_cast<std::size_t>(n) * c.classes, 0.0);
  Dataset d;
  for (int k = 0; k < c.classes; ++k) {
    for (int i = 0; i < c.points_per_class; ++i) {
      const int row = k * c.points_per_class + i;
      const double r = c.points_per_class > 1 ? static_cast<double>(i) / (c.points_per_class - 1) : 0.0;
      const double t = 4.0 * k + 4.0 * r + c.noise * gen.next_normal();
      xs[static_cast<std::size_t>(row) * 2] = r * std::sin(t);
      xs[static_cast<std::size_t>(row) * 2 + 1] = r * std::cos(t);
      hot[static_cast<std::size_t>(row) * c.classes + k] = 1.0;
      d.labels.push_back(k);
    }
  }
  d.x = Tensor::from_vector(xs, {n, 2});
  d.one_hot = Tensor::from_vector(hot, {n, c.classes});
  return d;
}

struct Linear {
  Tensor weight;  // [in, out], N(0, 2/in): He initialisation for ReLU layers
  Tensor bias;    // [out], zeros

  Linear(int in, int out, Generator& gen)
      : weight(Tensor::randn({in, out}, gen) * std::sqrt(2.0 / in)), bias(Tensor::zeros({out})) {
    weight.requires_grad_();
    bias.requires_grad_();
  }
  Tensor operator()(const Tensor& x) const { return matmul(x, weight) + bias; }  // [N, out]
};

double accuracy(const Tensor& logits, const std::vector<int>& labels) {
  const std::vector<double> v = logits.to_vector();
  const int64_t k = logits.size(1);
  int correct = 0;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < k; ++c) {
      if (v[i * static_cast<std::size_t>(k) + static_cast<std::size_t>(c)] > v[i * static_cast<std::size_t>(k) + static_cast<std::size_t>(best)]) best = c;
    }
    correct += best == labels[i];
  }
  return static_cast<double>(correct) / static_cast<double>(labels.size());
}

}  // namespace

SpiralsResult train_spirals(const SpiralsConfig& c, const std::function<void(int, double, double)>& on_log) {
  QKGRAD_CHECK(c.classes >= 2 && c.points_per_class >= 1 && c.hidden >= 1 && c.steps >= 1,
               "spirals: need classes >= 2, points_per_class >= 1, hidden >= 1 and steps >= 1");
  Generator data_gen(c.seed, /*stream=*/1), init_gen(c.seed, /*stream=*/2);
  const Dataset data = make_spirals(c, data_gen);

  Linear l1(2, c.hidden, init_gen), l2(c.hidden, c.hidden, init_gen), l3(c.hidden, c.classes, init_gen);
  SGD opt({l1.weight, l1.bias, l2.weight, l2.bias, l3.weight, l3.bias}, c.lr, c.momentum);

  SpiralsResult result;
  for (int step = 1; step <= c.steps; ++step) {
    const Tensor logits = l3(relu(l2(relu(l1(data.x)))));                 // [N, K]
    const Tensor log_sum_exp = log(sum(exp(logits), 1, /*keepdim=*/true));  // [N, 1]
    const Tensor label_logit = sum(logits * data.one_hot, 1, true);         // [N, 1]
    const Tensor loss = mean(log_sum_exp - label_logit);                    // []
    opt.zero_grad();
    loss.backward();
    opt.step();

    const double value = loss.item();
    QKGRAD_CHECK(std::isfinite(value), "spirals: the loss became ", value, " at step ", step,
                 "; lower --lr");
    result.losses.push_back(value);
    if (step == 1 || step == c.steps || (c.log_every > 0 && step % c.log_every == 0)) {
      NoGradGuard no_grad;
      result.accuracy = accuracy(l3(relu(l2(relu(l1(data.x))))), data.labels);
      if (on_log) on_log(step, value, result.accuracy);
    }
  }
  return result;
}

}  // namespace qkgrad::examples
