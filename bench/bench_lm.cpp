// qkgrad-bench-lm: one training step of the decoder-only language model (nn/language_model.h),
// timed, as qkgrad-lm train runs it.
//
// A step: zero the gradients, forward (causal, RoPE), cross-entropy (the mean over the batch's
// B·T next-token targets), backward, clip the global gradient norm to 1.0, AdamW (β₂ 0.95,
// decoupled weight decay 0.1 on all but the norms' gains and biases, as lm/trainer.cpp sets it).
// Inputs are random bytes from a seed. After --warmup-steps untimed steps, --steps timed ones;
// prints the median / min / max milliseconds per step, tokens per second, the achieved GFLOP/s
// of the matrix products and the peak resident memory. bench/compare_torch.py lm runs the same
// step in PyTorch and reads the --json line.
//
// FLOPs: every matrix product 2·m·n·k, ×3 for forward + backward; with BT = B·T tokens:
//   block:   4 projections 4 · 2·BT·D², attention 2 · 2·B·T²·D, FFN 2 · 2·BT·D·F
//   output:  2·BT·D·V
#include <sys/resource.h>

#include <algorithm>
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
#include "nn/language_model.h"
#include "nn/optim.h"
#include "ops/ops.h"
#include "ops/precision.h"

using namespace qkgrad;

namespace {

struct Options {
  int64_t layers = 4, d_model = 192, heads = 3, ffn = 768, batch = 16, context = 128;  // qkgrad-lm's demo preset
  int64_t steps = 10, warmup_steps = 2, threads = 0;
  std::string attention = "scaled_dot", precision = "f32";
  bool json = false;
};

std::optional<int> parse_options(int argc, char** argv, Options& o) {
  Args args("qkgrad-bench-lm", "Times one training step of the decoder-only language model (defaults: qkgrad-lm's demo preset).",
            kProgramStyle);
  args.option("layers", "decoder blocks", &o.layers, 1, 64);
  args.option("d-model", "model width", &o.d_model, 2, 16384);
  args.option("heads", "attention heads", &o.heads, 1, 256);
  args.option("ffn", "feed-forward width", &o.ffn, 1, 65536);
  args.option("batch", "windows per batch", &o.batch, 1, 65536);
  args.option("context", "bytes per window", &o.context, 2, 65536);
  args.option("steps", "timed steps", &o.steps, 1, 1'000'000);
  args.option("warmup-steps", "untimed steps first", &o.warmup_steps, 0, 1'000'000);
  args.option("threads", "CPU threads", &o.threads, 1, 4096)->default_str("all");
  args.choice("attention", "attention mode", &o.attention, attention_mode_names());
  args.choice("precision", "f32, or bf16: mixed precision in the linear layers", &o.precision, {"f32", "bf16"});
  args.flag("json", "print one JSON line instead of the text", &o.json);
  return args.parse_main(argc, argv);
}

double flops_per_step(const Options& o) {
  const double B = static_cast<double>(o.batch), T = static_cast<double>(o.context), D = static_cast<double>(o.d_model);
  const double F = static_cast<double>(o.ffn), BT = B * T;
  const double block = 4 * 2 * BT * D * D + 2 * 2 * B * T * T * D + 2 * 2 * BT * D * F;
  return 3 * (static_cast<double>(o.layers) * block + 2 * BT * D * 256);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (const auto status = parse_options(argc, argv, o)) return *status;
  try {
    if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
    LanguageModelConfig c;
    c.layers = o.layers;
    c.d_model = o.d_model;
    c.heads = o.heads;
    c.ffn = o.ffn;
    c.attention = attention_mode_from_name(o.attention);
    c.qknorm_length = static_cast<double>(o.context);
    LanguageModel model(c);
    AdamOptions adam;
    adam.beta2 = 0.95;
    adam.weight_decay = 0.1;
    adam.decoupled = true;
    adam.no_decay = LanguageModel::no_weight_decay();
    Adam opt(model.named_parameters(), adam);
    Generator data(42, 9);
    std::vector<int64_t> bytes(static_cast<std::size_t>(o.batch * (o.context + 1)));
    for (auto& b : bytes) b = static_cast<int64_t>(data.next_below(256));
    std::vector<int64_t> in, next;  // [B, T] each: window r's bytes and the byte after each
    for (int64_t r = 0; r < o.batch; ++r) {
      for (int64_t t = 0; t < o.context; ++t) {
        in.push_back(bytes[r * (o.context + 1) + t]);
        next.push_back(bytes[r * (o.context + 1) + t + 1]);
      }
    }
    const Tensor ids = Tensor::from_ids(in, {o.batch, o.context}), targets = Tensor::from_ids(next, {o.batch, o.context});
    const std::vector<int64_t> lengths(static_cast<std::size_t>(o.batch), o.context);
    const std::vector<Tensor> params = model.parameters();
    const double tokens = static_cast<double>(o.batch * o.context);
    auto step = [&] {
      opt.zero_grad();
      const MixedPrecision policy(parse_precision(o.precision));
      const Tensor loss = cross_entropy(model.forward(ids, lengths), targets).sum / tokens;  // logits [B, T, 256]
      loss.backward();
      opt.step(clip_factor(grad_norm(params), 1.0));
      return loss.item();
    };
    for (int64_t i = 0; i < o.warmup_steps; ++i) step();
    std::vector<double> ms;
    for (int64_t i = 0; i < o.steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = ms[ms.size() / 2];
    const double tokens_per_s = tokens / (median / 1000.0), gflops = flops_per_step(o) / (median / 1000.0) / 1e9;
    if (o.json) {
      const Json line = {{"framework", "qkgrad"}, {"layers", o.layers}, {"d_model", o.d_model}, {"heads", o.heads},
                         {"ffn", o.ffn}, {"batch", o.batch}, {"context", o.context}, {"attention", o.attention},
                         {"precision", o.precision}, {"threads", num_threads()}, {"parameters", model.parameter_count()},
                         {"median_ms", median}, {"min_ms", ms.front()}, {"max_ms", ms.back()},
                         {"tokens_per_s", tokens_per_s}, {"gflops", gflops}, {"peak_rss_mb", peak_rss_mb()}};
      std::printf("%s\n", dump_json(line).c_str());
    } else {
      std::printf("qkgrad LM training step: %ld blocks, d %ld, %ld heads, ffn %ld, %ld x %ld bytes, %s, %s, %d threads, %ld parameters\n",
                  static_cast<long>(o.layers), static_cast<long>(o.d_model), static_cast<long>(o.heads), static_cast<long>(o.ffn),
                  static_cast<long>(o.batch), static_cast<long>(o.context), o.attention.c_str(), o.precision.c_str(),
                  num_threads(), static_cast<long>(model.parameter_count()));
      std::printf("ms per step: median %.2f  min %.2f  max %.2f  (%ld steps after %ld warm-up)\n", median, ms.front(), ms.back(),
                  static_cast<long>(o.steps), static_cast<long>(o.warmup_steps));
      std::printf("tokens/s %.0f   matmul GFLOP/s %.1f   peak RSS %.0f MB\n", tokens_per_s, gflops, peak_rss_mb());
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-bench-lm: %s\n", e.what());
    return 1;
  }
}
