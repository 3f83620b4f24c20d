// qkgrad-mlp: trains a small MLP on generated spirals and prints the loss falling.
//   qkgrad-mlp [--seed N] [--steps N] [--hidden N] [--classes K] [--points N] [--lr X] [--threads N]
// The command line is cli/'s Args (CLI11, as qkgrad-translate's): a bad or missing value, or an
// unknown option, is refused with a message that names it, and exit status 2.
#include <cstdint>
#include <cstdio>
#include <limits>

#include "cli/args.h"
#include "core/backend.h"
#include "core/error.h"
#include "mlp/spirals.h"

int main(int argc, char** argv) {
  using namespace qkgrad;
  examples::SpiralsConfig config;
  int threads = 0;  // 0: all
  Args args("qkgrad-mlp", "Trains a two-layer MLP on generated spirals and prints the loss falling.", kProgramStyle);
  args.option("seed", "random seed for data and weights", &config.seed, 0, std::numeric_limits<int64_t>::max());
  args.option("steps", "full-batch SGD steps", &config.steps, 1, 100'000'000);
  args.option("hidden", "hidden layer width", &config.hidden, 1, 65536);
  args.option("classes", "number of spiral arms", &config.classes, 2, 1000)->type_name("K");
  args.option("points", "points per arm", &config.points_per_class, 1, 1'000'000);
  args.option("lr", "learning rate (> 0)", &config.lr, [](double x) { return x > 0; }, "> 0");
  args.option("threads", "CPU threads", &threads, 1, 4096)->default_str("all");
  if (const auto status = args.parse_main(argc, argv)) return *status;
  try {
    if (threads > 0) set_num_threads(threads);
    std::printf("spirals: %d arms x %d points, MLP 2-%d-%d-%d, SGD lr %g momentum %g, seed %llu\n",
                config.classes, config.points_per_class, config.hidden, config.hidden, config.classes,
                config.lr, config.momentum, static_cast<unsigned long long>(config.seed));
    const auto result = examples::train_spirals(config, [](int step, double loss, double acc) {
      std::printf("step %5d  loss %.6f  train accuracy %5.1f%%\n", step, loss, 100 * acc);
      std::fflush(stdout);
    });
    std::printf("final loss %.6f, training accuracy %.1f%%\n", result.losses.back(), 100 * result.accuracy);
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
