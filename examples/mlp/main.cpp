// qkgrad-mlp: trains a small MLP on generated spirals and prints the loss falling.
//   qkgrad-mlp [--seed N] [--steps N] [--hidden N] [--classes K] [--lr X] [--threads N]
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/backend.h"
#include "core/error.h"
#include "mlp/spirals.h"

namespace {

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: qkgrad-mlp [options]\n"
               "  --seed N      random seed for data and weights (default 1)\n"
               "  --steps N     full-batch SGD steps (default 1500)\n"
               "  --hidden N    hidden layer width (default 64)\n"
               "  --classes K   number of spiral arms (default 3)\n"
               "  --points N    points per arm (default 100)\n"
               "  --lr X        learning rate (default 0.1)\n"
               "  --threads N   CPU threads (default: all)\n");
}

bool parse_number(const std::string& text, double& out) {
  char* end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  using namespace qkgrad;
  examples::SpiralsConfig config;
  int threads = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    }
    double value = 0;
    if (i + 1 >= argc || !parse_number(argv[i + 1], value)) {
      std::fprintf(stderr, "qkgrad-mlp: '%s' needs a numeric value\n", arg.c_str());
      usage(stderr);
      return 2;
    }
    ++i;
    const bool whole = value == static_cast<double>(static_cast<long long>(value));
    auto need = [&](bool ok, const char* what) {
      if (!ok) {
        std::fprintf(stderr, "qkgrad-mlp: %s must be %s, got %s\n", arg.c_str(), what, argv[i]);
        std::exit(2);
      }
    };
    if (arg == "--seed") { need(whole && value >= 0, "a non-negative integer"); config.seed = static_cast<uint64_t>(value); }
    else if (arg == "--steps") { need(whole && value >= 1, "an integer >= 1"); config.steps = static_cast<int>(value); }
    else if (arg == "--hidden") { need(whole && value >= 1, "an integer >= 1"); config.hidden = static_cast<int>(value); }
    else if (arg == "--classes") { need(whole && value >= 2, "an integer >= 2"); config.classes = static_cast<int>(value); }
    else if (arg == "--points") { need(whole && value >= 1, "an integer >= 1"); config.points_per_class = static_cast<int>(value); }
    else if (arg == "--lr") { need(value > 0, "> 0"); config.lr = value; }
    else if (arg == "--threads") { need(whole && value >= 1, "an integer >= 1"); threads = static_cast<int>(value); }
    else {
      std::fprintf(stderr, "qkgrad-mlp: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
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
