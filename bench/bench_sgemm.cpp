// qkgrad-bench-sgemm: float32 GEMM GFLOP/s of this machine, for every provider this build has
// (OpenBLAS, oneDNN: backends/cpu/cpu_gemm_provider.h), at the shapes of the training step and
// at square sizes, against the machine's peak: the best one-thread square product × threads (or
// the best product on all threads, if higher).
//   qkgrad-bench-sgemm [--threads N] [--json] [--quick] [--precision f32|bf16]
// With --precision bf16 it measures the mixed-precision GEMM instead (cpu::bf16_gemm: bf16
// operands, float32 accumulation and result; oneDNN's matmul primitive), against the bf16 peak
// measured the same way; its one column is named "bf16".
// The training step's products are those of its linear layers y = x·Wᵀ, x: [M, in], W: [out, in],
// M = batch × length tokens, for bench/compare_torch.py's configs C, A and B:
//   forward  y  = x · Wᵀ    (m, n, k) = (M, out, in)
//   backward dx = dy · W    (M, in, out)
//   backward dW = dyᵀ · x   (out, in, M)
// for the attention projections (in = out = D), the feed-forward layers (D → F, F → D) and the
// output logits (D → V). Every figure is a median over repeated calls after one warm-up call.
// The command line is cli/'s Args (CLI11, as qkgrad-translate's).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cpu/cpu_gemm_provider.h"
#include "cli/args.h"
#include "core/backend.h"
#include "core/tensor.h"
#include "io/json.h"

using namespace qkgrad;
using cpu::GemmProvider;

namespace {

struct Shape3 {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// The products of one training step of a config (see the header).
std::vector<Shape3> step_shapes(const char* config, int64_t tokens, int64_t d, int64_t f, int64_t v) {
  std::vector<Shape3> out;
  const struct { const char* layer; int64_t in, out; } layers[] = {{"proj", d, d}, {"ffn1", d, f}, {"ffn2", f, d},
                                                                    {"logits", d, v}};
  for (const auto& l : layers) {
    const std::string base = std::string(config) + " " + l.layer;
    out.push_back({base + " forward", tokens, l.out, l.in, false, true});
    out.push_back({base + " dx", tokens, l.in, l.out, false, false});
    out.push_back({base + " dW", l.out, l.in, tokens, true, false});
  }
  return out;
}

std::vector<Shape3> all_shapes(bool quick) {
  std::vector<Shape3> shapes;
  for (const int64_t n : {512, 1024, 2048}) {
    if (!quick || n == 512) shapes.push_back({"square " + std::to_string(n), n, n, n, false, false});
  }
  for (const auto& s : step_shapes("C", 64 * 32, 128, 512, 4000)) shapes.push_back(s);
  if (quick) return shapes;
  for (const auto& s : step_shapes("A", 32 * 40, 256, 1024, 8000)) shapes.push_back(s);
  for (const auto& s : step_shapes("B", 16 * 64, 512, 2048, 8000)) shapes.push_back(s);
  return shapes;
}

bool g_bf16 = false;  // --precision bf16: measure cpu::bf16_gemm instead of sgemm

// Median GFLOP/s of `s` through `provider` (or the bf16 GEMM), on the threads now set.
double gflops(const Shape3& s, GemmProvider provider) {
  cpu::set_gemm_provider(provider);
  Generator gen(1);
  const Tensor a = Tensor::randn({s.m * s.k}, gen), b = Tensor::randn({s.k * s.n}, gen);
  const Tensor a16 = a.to(DType::bf16), b16 = b.to(DType::bf16);
  Tensor c = Tensor::empty({s.m * s.n});
  const double flops = 2.0 * static_cast<double>(s.m * s.n * s.k);
  const int reps = static_cast<int>(std::clamp(3e9 / flops, 5.0, 40.0));
  std::vector<double> rates;
  for (int r = 0; r <= reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    if (g_bf16) {
      cpu::bf16_gemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a16.data<bfloat16>(), s.trans_a ? s.m : s.k,
                     b16.data<bfloat16>(), s.trans_b ? s.k : s.n, 0.0f, c.data<float>(), s.n);
    } else {
      cpu::sgemm(s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, a.data<float>(), s.trans_a ? s.m : s.k, b.data<float>(),
                 s.trans_b ? s.k : s.n, 0.0f, c.data<float>(), s.n);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r > 0) rates.push_back(flops / seconds / 1e9);  // the first call warms caches and the provider up
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

// The machine's peak: the best one-thread square product (512, 1024, 2048) over the providers,
// times the threads.
double one_thread_best(const std::vector<GemmProvider>& providers, int threads) {
  set_num_threads(1);
  double best = 0;
  for (const GemmProvider p : providers) {
    for (const int64_t n : {512, 1024, 2048}) best = std::max(best, gflops({"square", n, n, n, false, false}, p));
  }
  set_num_threads(threads);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false, quick = false;
  int threads = 0;  // 0: all
  std::string precision = "f32";
  Args args("qkgrad-bench-sgemm",
            "float32 GEMM GFLOP/s of every provider at the training step's shapes, against the machine's peak.",
            kProgramStyle);
  args.option("threads", "CPU threads", &threads, 1, 4096)->default_str("all");
  args.flag("json", "print one JSON line instead of the table", &json);
  args.flag("quick", "only square 512 and config C's shapes", &quick);
  args.choice("precision", "f32 (sgemm, every provider) or bf16 (bf16 operands, f32 accumulation: oneDNN's matmul)",
              &precision, {"f32", "bf16"});
  if (const auto status = args.parse_main(argc, argv)) return *status;
  g_bf16 = precision == "bf16";
  if (g_bf16 && !cpu::bf16_gemm_missing().empty()) {
    std::fprintf(stderr, "qkgrad-bench-sgemm: note: %s; measuring the bf16 GEMM anyway\n", cpu::bf16_gemm_missing().c_str());
  }
  if (threads > 0) set_num_threads(threads);
  threads = num_threads();
  const GemmProvider in_use = cpu::gemm_provider();
  // bf16: one column (the provider setting does not apply to it).
  const std::vector<GemmProvider> providers =
      g_bf16 ? std::vector<GemmProvider>{in_use} : cpu::available_gemm_providers();
  // The peak: the best one-thread product times the threads, or the best square product on all
  // threads if that is higher (clock speeds vary from run to run on shared machines).
  const double one_thread = one_thread_best(providers, threads);
  double all_threads = 0;
  for (const GemmProvider p : providers) all_threads = std::max(all_threads, gflops({"square", 2048, 2048, 2048, false, false}, p));
  const double peak = std::max(one_thread * threads, all_threads);
  if (!json) {
    std::printf("%s GEMM on %d threads; peak %.0f GFLOP/s (the best 1-thread square product, %.1f, x %d; or the "
                "best 2048² product on %d threads, %.1f, if higher)\n",
                g_bf16 ? "bf16 (f32 accumulation)" : "float32", threads, peak, one_thread, threads, threads, all_threads);
    std::printf("%-20s %6s %6s %6s", "shape", "m", "n", "k");
    for (const GemmProvider p : providers) std::printf(" %16s", g_bf16 ? "bf16" : cpu::gemm_provider_name(p));
    std::printf("\n");
  }
  Json by_provider = Json::object(), by_size = Json::object();
  double best_square = 0;
  for (const Shape3& s : all_shapes(quick)) {
    if (!json) std::printf("%-20s %6ld %6ld %6ld", s.name.c_str(), static_cast<long>(s.m), static_cast<long>(s.n), static_cast<long>(s.k));
    for (const GemmProvider p : providers) {
      const double rate = gflops(s, p);
      by_provider[g_bf16 ? "bf16" : cpu::gemm_provider_name(p)][s.name] = rate;
      if (s.name.rfind("square", 0) == 0 && p == in_use) {
        by_size[std::to_string(s.m)] = rate;
        best_square = std::max(best_square, rate);
      }
      if (!json) std::printf(" %9.1f (%3.0f%%)", rate, 100 * rate / peak);
    }
    if (!json) std::printf("\n");
    std::fflush(stdout);
  }
  cpu::set_gemm_provider(in_use);
  if (json) {
    const Json result = {{"sgemm_gflops", best_square}, {"precision", precision}, {"threads", threads},
                         {"provider", g_bf16 ? "bf16" : cpu::gemm_provider_name(in_use)},
                         {"peak_gflops", peak}, {"one_thread_gflops", one_thread}, {"by_size", by_size},
                         {"by_provider", by_provider}};
    std::printf("%s\n", dump_json(result).c_str());
  } else {
    std::printf("in use: %s (QKGRAD_CPU_GEMM=openblas|onednn chooses); best square product %.1f GFLOP/s = %.0f%% of peak\n",
                cpu::gemm_provider_name(in_use), best_square, 100 * best_square / peak);
  }
  return 0;
}
