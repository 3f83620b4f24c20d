// qkgrad-bench-sgemm: the OpenBLAS sgemm GFLOP/s of this machine (median of repeated square
// products at several sizes), the peak every training-step figure is compared with.
//   qkgrad-bench-sgemm [--threads N] [--json]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

using namespace qkgrad;

int main(int argc, char** argv) {
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") json = true;
    else if (arg == "--threads" && i + 1 < argc) set_num_threads(std::max(1, std::atoi(argv[++i])));
    else {
      std::fprintf(stderr, "usage: qkgrad-bench-sgemm [--threads N] [--json]\n");
      return 2;
    }
  }
  double best = 0;
  std::string sizes;
  for (int n : {256, 512, 1024, 2048}) {
    Generator gen(1);
    Tensor a = Tensor::randn({n, n}, gen), b = Tensor::randn({n, n}, gen), c = Tensor::empty({n, n});
    std::vector<double> rates;
    const int reps = n >= 2048 ? 4 : 12;
    for (int r = 0; r < reps + 1; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data<float>(), n, b.data<float>(), n, 0.0f,
                  c.data<float>(), n);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r > 0) rates.push_back(2.0 * n * n * n / s / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    const double median = rates[rates.size() / 2];
    best = std::max(best, median);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s\"%d\": %.1f", sizes.empty() ? "" : ", ", n, median);
    sizes += buf;
    if (!json) std::printf("sgemm %4d x %4d x %4d: %6.1f GFLOP/s (median of %d)\n", n, n, n, median, reps);
  }
  if (json) {
    std::printf("{\"sgemm_gflops\": %.1f, \"threads\": %d, \"by_size\": {%s}}\n", best, num_threads(), sizes.c_str());
  } else {
    std::printf("sgemm peak: %.1f GFLOP/s on %d threads\n", best, num_threads());
  }
  return 0;
}
