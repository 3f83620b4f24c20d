// qkgrad-bench-sgemm: the OpenBLAS sgemm GFLOP/s of this machine (median of repeated square
// products at several sizes), the peak every training-step figure is compared with.
//   qkgrad-bench-sgemm [--threads N] [--json]
// The command line is cli/'s Args (CLI11, as qkgrad-translate's): a bad or missing value, or an
// unknown option, is refused with a message that names it, and exit status 2.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/backend.h"
#include "core/tensor.h"
#include "io/json.h"

using namespace qkgrad;

int main(int argc, char** argv) {
  bool json = false;
  int threads = 0;  // 0: all
  Args args("qkgrad-bench-sgemm", "The OpenBLAS sgemm GFLOP/s of this machine (the peak of the training-step figures).",
            kProgramStyle);
  args.option("threads", "CPU threads", &threads, 1, 4096)->default_str("all");
  args.flag("json", "print one JSON line instead of the text", &json);
  if (const auto status = args.parse_main(argc, argv)) return *status;
  if (threads > 0) set_num_threads(threads);
  double best = 0;
  Json by_size = Json::object();  // GFLOP/s by n
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
    by_size[std::to_string(n)] = median;
    if (!json) std::printf("sgemm %4d x %4d x %4d: %6.1f GFLOP/s (median of %d)\n", n, n, n, median, reps);
  }
  if (json) {
    const Json result = {{"sgemm_gflops", best}, {"threads", num_threads()}, {"by_size", by_size}};
    std::printf("%s\n", dump_json(result).c_str());
  } else {
    std::printf("sgemm peak: %.1f GFLOP/s on %d threads\n", best, num_threads());
  }
  return 0;
}
