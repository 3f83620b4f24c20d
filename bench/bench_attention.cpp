// qkgrad-bench-attention: the fused attention op against the same math composed from primitive
// ops (attention_reference), in one run, interleaved (fused, composed, fused, ...).
//
// For each (B, H, T, d) and causal or not it prints the median milliseconds of a forward pass
// (no grad) and of forward + backward, and the peak memory allocated above the inputs during
// forward + backward (from the caching allocator's statistics), for both, with the ratio.
//   qkgrad-bench-attention [--reps N] [--threads N] [--mode qknorm|scaled_dot] [--shape B,H,T,d]
//                          [--causal yes|no] [--device cpu|cuda] [--json]
// --shape and --causal restrict the run to one shape / one masking; --json prints one JSON object
// per line instead of the table (bench/compare_torch.py's `attention` subcommand reads it).
// --device cuda runs both on the GPU: each timed pass ends by copying one element of its result
// (the output, or a gradient) to the host, which waits until the GPU has finished all the work
// queued before it (one stream), and the memory is the CUDA caching allocator's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"

using namespace qkgrad;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Returns when every kernel that produces `t` has finished: copying one of its elements to the
// host waits on the GPU (the default stream runs work in order); on the CPU it is already done.
void wait_for(const Tensor& t) {
  if (t.device() == Device::cpu || t.numel() == 0) return;
  double first = 0;  // big enough for one element of any dtype
  backend(t.device()).copy_to_host(&first, t.raw_data(), dtype_size(t.dtype()));
}

}  // namespace

void usage() {
  std::fprintf(stderr,
               "usage: qkgrad-bench-attention [--reps N] [--threads N] [--mode qknorm|scaled_dot] [--shape B,H,T,d]\n"
               "                              [--causal yes|no] [--device cpu|cuda] [--json]\n");
}

struct Shape4 {
  int64_t b, h, t, d;
};

int main(int argc, char** argv) {
  int reps = 9, threads = 0;
  bool json = false;
  int causal_only = -1;  // -1: both
  Device device = Device::cpu;
  AttentionMode mode = AttentionMode::qknorm;
  std::vector<Shape4> shapes = {{32, 4, 40, 64}, {16, 8, 64, 64}, {8, 8, 256, 64}};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
      continue;
    }
    if (i + 1 >= argc) {
      usage();
      return 2;
    }
    const std::string value = argv[++i];
    Shape4 one{};
    if (arg == "--reps") reps = std::max(1, std::atoi(value.c_str()));
    else if (arg == "--threads") threads = std::atoi(value.c_str());
    else if (arg == "--mode" && (value == "qknorm" || value == "scaled_dot"))
      mode = value == "qknorm" ? AttentionMode::qknorm : AttentionMode::scaled_dot;
    else if (arg == "--causal" && (value == "yes" || value == "no"))
      causal_only = value == "yes" ? 1 : 0;
    else if (arg == "--device" && (value == "cpu" || value == "cuda"))
      device = value == "cuda" ? Device::cuda : Device::cpu;
    else if (arg == "--shape" && std::sscanf(value.c_str(), "%ld,%ld,%ld,%ld", &one.b, &one.h, &one.t, &one.d) == 4 &&
             one.b > 0 && one.h > 0 && one.t > 0 && one.d > 0)
      shapes = {one};
    else {
      usage();
      return 2;
    }
  }
  Backend* be = nullptr;
  try {
    be = &backend(device);  // cuda without CUDA support or without a GPU: says why, at once
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-bench-attention: %s\n", e.what());
    return 2;
  }
  if (threads > 0) set_num_threads(threads);
  const char* mode_name = mode == AttentionMode::qknorm ? "qknorm" : "scaled_dot";
  if (!json) {
    std::printf("%s attention, float32, on %s, %d threads, median of %d; memory = peak allocated above the inputs\n",
                mode == AttentionMode::qknorm ? "QKNorm" : "scaled dot-product",
                std::string(device_name(device)).c_str(), num_threads(), reps);
    std::printf("%-22s %-6s | %9s %9s %6s | %9s %9s %6s | %9s %9s %6s\n", "B, H, T, d", "causal", "fwd fused",
                "composed", "ratio", "f+b fused", "composed", "ratio", "MB fused", "composed", "ratio");
  }
  for (const Shape4 s : shapes) {
    for (bool causal : {false, true}) {
      if (causal_only >= 0 && causal != (causal_only == 1)) continue;
      Generator gen(1);
      Tensor q = Tensor::randn({s.b, s.t, s.h * s.d}, gen, DType::f32, device).requires_grad_();
      Tensor k = Tensor::randn({s.b, s.t, s.h * s.d}, gen, DType::f32, device).requires_grad_();
      Tensor v = Tensor::randn({s.b, s.t, s.h * s.d}, gen, DType::f32, device).requires_grad_();
      Tensor g = Tensor::full({}, qknorm_initial_g(static_cast<double>(s.t)), DType::f32, device);
      g.requires_grad_();
      const Tensor seed = Tensor::ones({s.b, s.t, s.h * s.d}, DType::f32, device);
      wait_for(seed);  // the set-up is done before the first timing
      AttentionOptions o;
      o.heads = s.h;
      o.mode = mode;
      o.causal = causal;
      std::vector<double> fwd[2], train[2], memory[2];
      for (int r = 0; r < reps + 1; ++r) {  // round 0 warms the caches and is dropped
        for (int composed = 0; composed < 2; ++composed) {
          auto run = [&] { return composed ? attention_reference(q, k, v, g, o).out : attention(q, k, v, g, o).out; };
          double t0 = now_ms();
          {
            NoGradGuard no_grad;
            const Tensor out = run();
            wait_for(out);
          }
          const double f = now_ms() - t0;
          for (Tensor* x : {&q, &k, &v, &g}) x->clear_grad();
          be->reset_peak_memory();
          const std::size_t before = be->allocator_stats().bytes_in_use;
          t0 = now_ms();
          run().backward(seed);
          wait_for(q.grad());  // the backward's last kernels may write any of the gradients,
          const double fb = now_ms() - t0;  // but the copy waits for all of them
          const double mb = static_cast<double>(be->allocator_stats().peak_bytes_in_use - before) / (1 << 20);
          if (r > 0) {
            fwd[composed].push_back(f);
            train[composed].push_back(fb);
            memory[composed].push_back(mb);
          }
        }
      }
      char label[64];
      std::snprintf(label, sizeof label, "%ld, %ld, %ld, %ld", static_cast<long>(s.b), static_cast<long>(s.h),
                    static_cast<long>(s.t), static_cast<long>(s.d));
      const double f0 = median(fwd[0]), f1 = median(fwd[1]), t0 = median(train[0]), t1 = median(train[1]);
      const double m0 = median(memory[0]), m1 = median(memory[1]);
      if (json) {
        std::printf("{\"b\": %ld, \"h\": %ld, \"t\": %ld, \"d\": %ld, \"causal\": %s, \"mode\": \"%s\", "
                    "\"device\": \"%s\", \"threads\": %d, \"reps\": %d, \"forward_ms\": %.4f, \"forward_ms_composed\": %.4f, "
                    "\"train_ms\": %.4f, \"train_ms_composed\": %.4f, \"train_ms_min\": %.4f, "
                    "\"train_ms_max\": %.4f, \"peak_mb\": %.3f, \"peak_mb_composed\": %.3f}\n",
                    static_cast<long>(s.b), static_cast<long>(s.h), static_cast<long>(s.t), static_cast<long>(s.d),
                    causal ? "true" : "false", mode_name, std::string(device_name(device)).c_str(), num_threads(), reps, f0, f1, t0, t1,
                    *std::min_element(train[0].begin(), train[0].end()),
                    *std::max_element(train[0].begin(), train[0].end()), m0, m1);
      } else {
        std::printf("%-22s %-6s | %9.3f %9.3f %6.2f | %9.3f %9.3f %6.2f | %9.2f %9.2f %6.2f\n", label,
                    causal ? "yes" : "no", f0, f1, f1 / f0, t0, t1, t1 / t0, m0, m1, m1 / m0);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
