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
// The command line is cli/'s Args (CLI11, as qkgrad-translate's): a bad or missing value, or an
// unknown option, is refused with a message that names it, and exit status 2.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "io/json.h"
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

struct Shape4 {
  int64_t b, h, t, d;
};

struct Options {
  int64_t reps = 9, threads = 0;  // threads 0: all
  bool json = false;
  std::string mode = "qknorm", device = "cpu", causal;  // causal "": both
  std::vector<Shape4> shapes = {{32, 4, 40, 64}, {16, 8, 64, 64}, {8, 8, 256, 64}};
};

// ---- the command line ----

// "B,H,T,d": four positive integers, or false.
bool parse_shape(const std::string& text, Shape4& s) {
  const char* p = text.data();
  const char* const end = text.data() + text.size();
  for (int64_t* x : {&s.b, &s.h, &s.t, &s.d}) {
    if (x != &s.b && (p == end || *p++ != ',')) return false;
    const auto r = std::from_chars(p, end, *x);
    if (r.ec != std::errc() || *x <= 0) return false;
    p = r.ptr;
  }
  return p == end;
}

// Reads the options from argv: the exit status main should return now (--help, a usage
// error), or nullopt to go on.
std::optional<int> parse_options(int argc, char** argv, Options& o) {
  Args args("qkgrad-bench-attention", "The fused attention op against the same math composed from primitive ops.",
            kProgramStyle);
  args.option("reps", "timed repetitions; the median is printed", &o.reps, 1, 1'000'000);
  args.option("threads", "CPU threads", &o.threads, 1, 4096)->default_str("all");
  args.choice("mode", "attention", &o.mode, {"qknorm", "scaled_dot"});
  args.custom("shape", "only this shape (default: 32,4,40,64 16,8,64,64 8,8,256,64)", "B,H,T,d",
              [&](const std::string& v) -> std::string {
                Shape4 one{};
                if (!parse_shape(v, one)) return "must be four positive integers B,H,T,d, got '" + v + "'";
                o.shapes = {one};
                return "";
              });
  args.choice("causal", "only causal masking, or only none (default: both)", &o.causal, {"yes", "no"});
  args.choice("device", "where both run (cuda: needs a CUDA build and a GPU)", &o.device, kDeviceChoices);
  args.flag("json", "print one JSON object per line instead of the table", &o.json);
  return args.parse_main(argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (const auto status = parse_options(argc, argv, opts)) return *status;
  const int reps = static_cast<int>(opts.reps);
  const bool json = opts.json;
  const int causal_only = opts.causal.empty() ? -1 : opts.causal == "yes" ? 1 : 0;  // -1: both
  const Device device = opts.device == "cuda" ? Device::cuda : Device::cpu;
  const AttentionMode mode = opts.mode == "qknorm" ? AttentionMode::qknorm : AttentionMode::scaled_dot;
  const std::vector<Shape4>& shapes = opts.shapes;
  Backend* be = nullptr;
  try {
    be = &backend(device);  // cuda without CUDA support or without a GPU: says why, at once
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-bench-attention: %s\n", e.what());
    return 2;
  }
  if (opts.threads > 0) set_num_threads(static_cast<int>(opts.threads));
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
        const Json line = {{"b", s.b}, {"h", s.h}, {"t", s.t}, {"d", s.d}, {"causal", causal}, {"mode", mode_name},
                           {"device", device_name(device)}, {"threads", num_threads()}, {"reps", reps},
                           {"forward_ms", f0}, {"forward_ms_composed", f1}, {"train_ms", t0}, {"train_ms_composed", t1},
                           {"train_ms_min", *std::min_element(train[0].begin(), train[0].end())},
                           {"train_ms_max", *std::max_element(train[0].begin(), train[0].end())},
                           {"peak_mb", m0}, {"peak_mb_composed", m1}};
        std::printf("%s\n", dump_json(line).c_str());
      } else {
        std::printf("%-22s %-6s | %9.3f %9.3f %6.2f | %9.3f %9.3f %6.2f | %9.2f %9.2f %6.2f\n", label,
                    causal ? "yes" : "no", f0, f1, f1 / f0, t0, t1, t1 / t0, m0, m1, m1 / m0);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
