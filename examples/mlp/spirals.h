// A first training program: classify points of K interleaved spirals with a small MLP.
//
//   x [N, 2] -> Linear(2, H) -> ReLU -> Linear(H, H) -> ReLU -> Linear(H, K) -> logits [N, K]
//   loss = mean over points of ( log Σ_c exp(logits[c]) - logits[label] )   (cross-entropy)
//
// Everything is built from the first ops (matmul, add, relu, exp, log, sum, mean, mul), trained
// full-batch with SGD + momentum, and is deterministic given the seed.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace qkgrad::examples {

struct SpiralsConfig {
  uint64_t seed = 1;
  int classes = 3;            // K spiral arms
  int points_per_class = 100;
  double noise = 0.2;         // angular noise of the points
  int hidden = 64;            // H
  int steps = 1500;
  double lr = 0.1;
  double momentum = 0.9;
  int log_every = 100;
};

struct SpiralsResult {
  std::vector<double> losses;  // one per step
  double accuracy = 0;         // on the training points after the last step
};

// on_log(step, loss, accuracy) is called after step 1, every log_every steps and after the last.
SpiralsResult train_spirals(const SpiralsConfig& config,
                            const std::function<void(int, double, double)>& on_log = {});

}  // namespace qkgrad::examples
