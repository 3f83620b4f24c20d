// qkgrad-bench: one training step of the Seq2SeqTransformer, timed.
//
// A step is what the trainer does: zero the gradients, forward (teacher forcing), label-smoothed
// cross-entropy (ε = 0.1, pad ignored), backward, clip the global gradient norm to 1.0, Adam.
// Inputs are random token ids from a seed, every sentence of the same length; padding masks are
// built and applied anyway (all lengths full). After --warmup-steps untimed steps, --steps timed
// ones; prints the median / min / max milliseconds per step, target tokens per second, the
// achieved GFLOP/s of the matrix products, the peak resident memory, and the system allocations
// and page faults per step.
//
// --device cuda runs the step on the GPU (the model, the batch and the optimizer state live
// there). A step ends by reading the loss value back to the host, which waits until the GPU has
// finished everything queued before it (one stream: see backends/cuda/cuda_backend.h), so each
// timed step includes all of its GPU work. The memory reported is then the peak of the CUDA
// caching allocator (bytes handed out to tensors) instead of the process's resident memory.
//
// FLOPs: every matrix product counts 2·m·n·k, times 3 for forward + backward (the backward does
// two products of the same size). Per step, with BS = B·S source and BT = B·T target tokens:
//   encoder layer:  4 projections 2·BS·D² · 4, attention 2 · 2·B·S²·D, FFN 2 · 2·BS·D·F
//   decoder layer:  self 4·2·BT·D² + 2·2·B·T²·D, cross 2·2·BT·D² + 2·2·BS·D² + 2·2·B·T·S·D,
//                   FFN 2·2·BT·D·F
//   output layer:   2·BT·D·V
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/ops.h"

using namespace qkgrad;

namespace {

struct Options {
  int64_t layers = 3, d_model = 256, heads = 4, ffn = 1024, vocab = 8000, batch = 32, src_len = 40, tgt_len = 40;
  int64_t steps = 10, warmup_steps = 2, threads = 0;
  std::string attn = "qknorm";
  std::string device = "cpu";
  double dropout = 0.0;
  bool json = false;
};

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: qkgrad-bench [--layers N] [--d-model N] [--heads N] [--ffn N] [--vocab N] [--batch N]\n"
               "                    [--src-len N] [--tgt-len N] [--steps N] [--warmup-steps N] [--threads N]\n"
               "                    [--attn qknorm|scaled_dot] [--dropout P] [--device cpu|cuda] [--json]\n"
               "  defaults: config A = 3 layers, d 256, 4 heads, ffn 1024, vocab 8000, 32 sentences x 40 tokens\n");
}

double flops_per_step(const Options& o) {
  const double B = static_cast<double>(o.batch), S = static_cast<double>(o.src_len), T = static_cast<double>(o.tgt_len);
  const double D = static_cast<double>(o.d_model), F = static_cast<double>(o.ffn), V = static_cast<double>(o.vocab);
  const double BS = B * S, BT = B * T;
  const double encoder = 4 * 2 * BS * D * D + 2 * 2 * B * S * S * D + 2 * 2 * BS * D * F;
  const double decoder = 4 * 2 * BT * D * D + 2 * 2 * B * T * T * D + 2 * 2 * BT * D * D + 2 * 2 * BS * D * D +
                         2 * 2 * B * T * S * D + 2 * 2 * BT * D * F;
  const double output = 2 * BT * D * V;
  return 3 * (static_cast<double>(o.layers) * (encoder + decoder) + output);
}

double peak_rss_mb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "qkgrad-bench: %s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto integer = [&](int64_t min) {
      const std::string v = next();
      char* end = nullptr;
      const long long x = std::strtoll(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || x < min) {
        std::fprintf(stderr, "qkgrad-bench: %s needs an integer >= %ld, got '%s'\n", arg.c_str(), static_cast<long>(min), v.c_str());
        std::exit(2);
      }
      return static_cast<int64_t>(x);
    };
    if (arg == "--layers") o.layers = integer(1);
    else if (arg == "--d-model") o.d_model = integer(1);
    else if (arg == "--heads") o.heads = integer(1);
    else if (arg == "--ffn") o.ffn = integer(1);
    else if (arg == "--vocab") o.vocab = integer(4);
    else if (arg == "--batch") o.batch = integer(1);
    else if (arg == "--src-len") o.src_len = integer(1);
    else if (arg == "--tgt-len") o.tgt_len = integer(1);
    else if (arg == "--steps") o.steps = integer(1);
    else if (arg == "--warmup-steps") o.warmup_steps = integer(0);
    else if (arg == "--threads") o.threads = integer(1);
    else if (arg == "--attn") {
      o.attn = next();
      if (o.attn != "qknorm" && o.attn != "scaled_dot") {
        std::fprintf(stderr, "qkgrad-bench: --attn must be qknorm or scaled_dot\n");
        return 2;
      }
    } else if (arg == "--dropout") {
      o.dropout = std::atof(next().c_str());
      if (!(o.dropout >= 0 && o.dropout < 1)) {
        std::fprintf(stderr, "qkgrad-bench: --dropout must be in [0, 1)\n");
        return 2;
      }
    } else if (arg == "--device") {
      o.device = next();
      if (o.device != "cpu" && o.device != "cuda") {
        std::fprintf(stderr, "qkgrad-bench: --device must be cpu or cuda\n");
        return 2;
      }
    } else if (arg == "--json") o.json = true;
    else if (arg == "--help" || arg == "-h") {
      usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "qkgrad-bench: unknown option '%s'\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  const Device device = o.device == "cuda" ? Device::cuda : Device::cpu;
  try {
    (void)backend(device);  // cuda without CUDA support or without a GPU: says why, at once
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-bench: %s\n", e.what());
    return 2;
  }
  try {
    if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
    TransformerConfig c;
    c.vocab = o.vocab;
    c.d_model = o.d_model;
    c.heads = o.heads;
    c.ffn = o.ffn;
    c.encoder_layers = c.decoder_layers = o.layers;
    c.attention = o.attn == "qknorm" ? AttentionMode::qknorm : AttentionMode::scaled_dot;
    c.qknorm_length = static_cast<double>(std::max(o.src_len, o.tgt_len));
    c.dropout = c.attention_dropout = c.ffn_dropout = o.dropout;
    c.word_dropout = 0;
    Seq2SeqTransformer model(c, device);
    Adam opt(model.named_parameters(), AdamOptions{});
    Generator data(42, 9);
    // Token ids in [4, vocab): no special tokens inside the sentences.
    auto random_ids = [&](int64_t rows, int64_t cols) {
      std::vector<int64_t> ids(static_cast<std::size_t>(rows * cols));
      for (auto& id : ids) id = 4 + static_cast<int64_t>(data.next_below(static_cast<uint64_t>(o.vocab - 4)));
      return Tensor::from_ids(ids, {rows, cols}, device);
    };
    const Tensor src = random_ids(o.batch, o.src_len), tgt_in = random_ids(o.batch, o.tgt_len), tgt_out = random_ids(o.batch, o.tgt_len);
    const std::vector<int64_t> src_lengths(static_cast<std::size_t>(o.batch), o.src_len);
    const std::vector<int64_t> tgt_lengths(static_cast<std::size_t>(o.batch), o.tgt_len);
    const std::vector<Tensor> params = model.parameters();
    // One training step; returns the loss per target token. Reading it at the end (a copy to
    // the host on the default stream) waits for the whole step, Adam included, on a GPU.
    auto step = [&] {
      opt.zero_grad();
      const Tensor logits = model.forward(src, src_lengths, tgt_in, tgt_lengths);
      const LossSum loss = cross_entropy(logits, tgt_out, 0.1, c.pad_id);
      const Tensor per_token = loss.sum / static_cast<double>(loss.tokens);
      per_token.backward();
      clip_grad_norm(params, 1.0);
      opt.step();
      return per_token.item();
    };
    // Copying a tensor to the host waits for the set-up's GPU work (the initial values) too.
    (void)params.front().detach().to(Device::cpu);
    for (int64_t i = 0; i < o.warmup_steps; ++i) step();
    Backend& be = backend(device);
    const AllocatorStats before = be.allocator_stats();
    rusage ru_before{};
    getrusage(RUSAGE_SELF, &ru_before);
    std::vector<double> ms;
    for (int64_t i = 0; i < o.steps; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    rusage ru_after{};
    getrusage(RUSAGE_SELF, &ru_after);
    const AllocatorStats after = be.allocator_stats();
    std::vector<double> sorted = ms;
    std::sort(sorted.begin(), sorted.end());
    const double median = sorted[sorted.size() / 2];
    const double tokens_per_s = static_cast<double>(o.batch * o.tgt_len) / (median / 1000.0);
    const double gflops = flops_per_step(o) / (median / 1000.0) / 1e9;
    const double faults_per_step = static_cast<double>(ru_after.ru_minflt - ru_before.ru_minflt) / static_cast<double>(o.steps);
    const uint64_t mallocs = after.system_allocations - before.system_allocations;
    // The CPU: the process's peak resident memory. A GPU: the device allocator's peak.
    const bool on_gpu = device == Device::cuda;
    const double peak_mb = on_gpu ? static_cast<double>(after.peak_bytes_in_use) / (1 << 20) : peak_rss_mb();
    const char* peak_key = on_gpu ? "peak_device_mb" : "peak_rss_mb";
    const char* peak_label = on_gpu ? "peak device memory" : "peak RSS";
    if (o.json) {
      std::printf("{\"framework\": \"qkgrad\", \"layers\": %ld, \"d_model\": %ld, \"heads\": %ld, \"ffn\": %ld, \"vocab\": %ld, "
                  "\"batch\": %ld, \"src_len\": %ld, \"tgt_len\": %ld, \"attn\": \"%s\", \"dropout\": %g, \"device\": \"%s\", \"threads\": %d, "
                  "\"median_ms\": %.3f, \"min_ms\": %.3f, \"max_ms\": %.3f, \"tgt_tokens_per_s\": %.1f, \"gflops\": %.2f, "
                  "\"%s\": %.1f, \"system_allocations_per_step\": %.2f, \"page_faults_per_step\": %.1f}\n",
                  static_cast<long>(o.layers), static_cast<long>(o.d_model), static_cast<long>(o.heads), static_cast<long>(o.ffn),
                  static_cast<long>(o.vocab), static_cast<long>(o.batch), static_cast<long>(o.src_len), static_cast<long>(o.tgt_len),
                  o.attn.c_str(), o.dropout, o.device.c_str(), num_threads(), median, sorted.front(), sorted.back(), tokens_per_s,
                  gflops, peak_key, peak_mb, static_cast<double>(mallocs) / static_cast<double>(o.steps), faults_per_step);
    } else {
      std::printf("qkgrad training step: %ld+%ld layers, d %ld, %ld heads, ffn %ld, vocab %ld, %ld x %ld/%ld tokens, %s, dropout %g, "
                  "on %s, %d threads\n",
                  static_cast<long>(o.layers), static_cast<long>(o.layers), static_cast<long>(o.d_model), static_cast<long>(o.heads),
                  static_cast<long>(o.ffn), static_cast<long>(o.vocab), static_cast<long>(o.batch), static_cast<long>(o.src_len),
                  static_cast<long>(o.tgt_len), o.attn.c_str(), o.dropout, o.device.c_str(), num_threads());
      std::printf("ms per step: median %.2f  min %.2f  max %.2f  (%ld steps after %ld warm-up)\n", median, sorted.front(),
                  sorted.back(), static_cast<long>(o.steps), static_cast<long>(o.warmup_steps));
      std::printf("target tokens/s %.0f   matmul GFLOP/s %.1f (%.2f GFLOP per step)   %s %.0f MB\n", tokens_per_s, gflops,
                  flops_per_step(o) / 1e9, peak_label, peak_mb);
      std::printf("steady state: %.2f system allocations and %.1f page faults per step\n",
                  static_cast<double>(mallocs) / static_cast<double>(o.steps), faults_per_step);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
