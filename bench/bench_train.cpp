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
// Under mpirun (a build with MPI) the step is data-parallel, as `qkgrad-translate train` runs it:
// --batch is the global batch, each of the N ranks takes batch/N of its sentences (random ids
// of its own), the loss is divided by the global target tokens, and the gradients are summed
// over the ranks in buckets during backward (distributed/gradient_reducer.h). Rank 0 prints;
// "comm" is the median time per step that waiting for the sums added (what backward did not
// hide). Compare `qkgrad-bench --threads 2` with `mpirun -np 2 qkgrad-bench --threads 1`.
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
//
//   qkgrad-bench [--layers N] [--d-model N] [--heads N] [--ffn N] [--vocab N] [--batch N] [--src-len N]
//                [--tgt-len N] [--steps N] [--warmup-steps N] [--threads N] [--attn qknorm|scaled_dot]
//                [--dropout P] [--device cpu|cuda] [--json]
// The command line is cli/'s Args (CLI11, as qkgrad-translate's): a bad or missing value, or an
// unknown option, is refused with a message that names it, and exit status 2.
// bench/compare_torch.py passes these flags and reads the --json line.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/cpu_gemm_provider.h"
#include "cli/args.h"
#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "io/json.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/ops.h"
#include "ops/precision.h"

using namespace qkgrad;

namespace {

struct Options {
  int64_t layers = 3, d_model = 256, heads = 4, ffn = 1024, vocab = 8000, batch = 32, src_len = 40, tgt_len = 40;
  int64_t steps = 10, warmup_steps = 2, threads = 0;
  std::string attn = "qknorm";
  std::string device = "cpu";
  std::string precision = "f32";  // or bf16: the linear layers' products (ops/precision.h)
  double dropout = 0.0;
  bool json = false;
};

// Reads the options from argv: the exit status main should return now (--help, a usage
// error), or nullopt to go on. The defaults are config A.
std::optional<int> parse_options(int argc, char** argv, Options& o) {
  Args args("qkgrad-bench", "Times one training step of the Seq2SeqTransformer (the defaults: config A).", kProgramStyle);
  args.option("layers", "encoder and decoder layers", &o.layers, 1, 64);
  args.option("d-model", "model width", &o.d_model, 1, 16384);
  args.option("heads", "attention heads", &o.heads, 1, 256);
  args.option("ffn", "feed-forward width", &o.ffn, 1, 65536);
  args.option("vocab", "vocabulary size", &o.vocab, 5, 1'000'000);
  args.option("batch", "sentences per batch", &o.batch, 1, 65536);
  args.option("src-len", "source tokens per sentence", &o.src_len, 1, 65536);
  args.option("tgt-len", "target tokens per sentence", &o.tgt_len, 1, 65536);
  args.option("steps", "timed steps", &o.steps, 1, 1'000'000);
  args.option("warmup-steps", "untimed steps first", &o.warmup_steps, 0, 1'000'000);
  args.option("threads", "CPU threads", &o.threads, 1, 4096)->default_str("all");
  args.choice("attn", "attention", &o.attn, {"qknorm", "scaled_dot"});
  args.option("dropout", "every dropout rate, in [0, 1)", &o.dropout, [](double p) { return p >= 0 && p < 1; }, "in [0, 1)")
      ->type_name("P");
  args.choice("device", "where the step runs (cuda: needs a CUDA build and a GPU)", &o.device, kDeviceChoices);
  args.choice("precision", "f32, or bf16: mixed precision in the linear layers (ops/precision.h)", &o.precision,
              {"f32", "bf16"});
  args.flag("json", "print one JSON line instead of the text", &o.json);
  return args.parse_main(argc, argv);
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
  if (const auto status = parse_options(argc, argv, o)) return *status;
  const Device device = o.device == "cuda" ? Device::cuda : Device::cpu;
  try {
    (void)backend(device);  // cuda without CUDA support or without a GPU: says why, at once
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-bench: %s\n", e.what());
    return 2;
  }
  std::unique_ptr<distributed::Communicator> comm;
  try {
    comm = distributed::from_launcher();
    const int ranks = comm->size(), rank = comm->rank();
    if (o.threads > 0) set_num_threads(static_cast<int>(o.threads));
    // This rank's sentences of the global batch.
    const int64_t local_batch = o.batch * (rank + 1) / ranks - o.batch * rank / ranks;
    QKGRAD_CHECK(local_batch > 0, "--batch ", o.batch, " has fewer sentences than the ", ranks, " ranks");
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
    if (const std::string missing = backend(device).bf16_products_missing();
        o.precision == "bf16" && rank == 0 && !missing.empty())
      std::fprintf(stderr, "qkgrad-bench: note: %s; measuring the bf16 step anyway (its products run no faster)\n",
                   missing.c_str());
    Adam opt(model.named_parameters(), AdamOptions{});
    Generator data(42, 9 + static_cast<uint64_t>(rank));
    // Token ids in [4, vocab): no special tokens inside the sentences.
    auto random_ids = [&](int64_t rows, int64_t cols) {
      std::vector<int64_t> ids(static_cast<std::size_t>(rows * cols));
      for (auto& id : ids) id = 4 + static_cast<int64_t>(data.next_below(static_cast<uint64_t>(o.vocab - 4)));
      return Tensor::from_ids(ids, {rows, cols}, device);
    };
    const Tensor src = random_ids(local_batch, o.src_len), tgt_in = random_ids(local_batch, o.tgt_len),
                 tgt_out = random_ids(local_batch, o.tgt_len);  // [b, S], [b, T], [b, T]
    const std::vector<int64_t> src_lengths(static_cast<std::size_t>(local_batch), o.src_len);
    const std::vector<int64_t> tgt_lengths(static_cast<std::size_t>(local_batch), o.tgt_len);
    const std::vector<Tensor> params = model.parameters();
    std::unique_ptr<distributed::GradientReducer> reducer;
    if (ranks > 1) reducer = std::make_unique<distributed::GradientReducer>(*comm, params);
    const double global_tokens = static_cast<double>(o.batch * o.tgt_len);
    std::vector<double> comm_ms;
    // One training step; returns the loss per target token. Reading it at the end (a copy to
    // the host on the default stream) waits for the whole step, Adam included, on a GPU.
    auto step = [&] {
      opt.zero_grad();
      const MixedPrecision policy(parse_precision(o.precision));
      const Tensor logits = model.forward(src, src_lengths, tgt_in, tgt_lengths);
      const LossSum loss = cross_entropy(logits, tgt_out, 0.1, c.pad_id);
      const Tensor per_token = loss.sum / global_tokens;
      if (reducer) {
        backward(per_token, Tensor::ones(per_token.shape(), per_token.dtype(), per_token.device()), reducer->hook());
        reducer->finish();
        comm_ms.push_back(1000 * reducer->last_wait_seconds());
      } else {
        per_token.backward();
      }
      opt.step(clip_factor(grad_norm(params), 1.0));  // clipped inside Adam's pass, as train does
      return per_token.item();
    };
    // Copying a tensor to the host waits for the set-up's GPU work (the initial values) too.
    (void)params.front().detach().to(Device::cpu);
    for (int64_t i = 0; i < o.warmup_steps; ++i) step();
    comm_ms.clear();
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
    std::sort(comm_ms.begin(), comm_ms.end());
    const double comm_median = comm_ms.empty() ? 0.0 : comm_ms[comm_ms.size() / 2];
    if (!comm->is_root()) return 0;  // rank 0 reports
    double param_bytes = 0;
    for (const Tensor& p : params) param_bytes += static_cast<double>(p.nbytes());
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
      const Json line = {{"framework", "qkgrad"}, {"gemm", cpu::gemm_provider_name(cpu::gemm_provider())}, {"layers", o.layers}, {"d_model", o.d_model}, {"heads", o.heads},
                         {"ffn", o.ffn}, {"vocab", o.vocab}, {"batch", o.batch}, {"src_len", o.src_len},
                         {"tgt_len", o.tgt_len}, {"attn", o.attn}, {"dropout", o.dropout}, {"device", o.device},
                         {"precision", o.precision},
                         {"threads", num_threads()}, {"median_ms", median}, {"min_ms", sorted.front()},
                         {"max_ms", sorted.back()}, {"tgt_tokens_per_s", tokens_per_s}, {"gflops", gflops},
                         {peak_key, peak_mb},
                         {"system_allocations_per_step", static_cast<double>(mallocs) / static_cast<double>(o.steps)},
                         {"page_faults_per_step", faults_per_step}, {"ranks", ranks}, {"comm_ms", comm_median},
                         {"gradient_mb", param_bytes / (1 << 20)}};
      std::printf("%s\n", dump_json(line).c_str());
    } else {
      std::printf("qkgrad training step: %ld+%ld layers, d %ld, %ld heads, ffn %ld, vocab %ld, %ld x %ld/%ld tokens, %s, dropout %g, "
                  "on %s, %d threads, float32 GEMM: %s, precision %s\n",
                  static_cast<long>(o.layers), static_cast<long>(o.layers), static_cast<long>(o.d_model), static_cast<long>(o.heads),
                  static_cast<long>(o.ffn), static_cast<long>(o.vocab), static_cast<long>(o.batch), static_cast<long>(o.src_len),
                  static_cast<long>(o.tgt_len), o.attn.c_str(), o.dropout, o.device.c_str(), num_threads(),
                  cpu::gemm_provider_name(cpu::gemm_provider()), o.precision.c_str());
      std::printf("ms per step: median %.2f  min %.2f  max %.2f  (%ld steps after %ld warm-up)\n", median, sorted.front(),
                  sorted.back(), static_cast<long>(o.steps), static_cast<long>(o.warmup_steps));
      std::printf("target tokens/s %.0f   matmul GFLOP/s %.1f (%.2f GFLOP per step)   %s %.0f MB\n", tokens_per_s, gflops,
                  flops_per_step(o) / 1e9, peak_label, peak_mb);
      std::printf("steady state: %.2f system allocations and %.1f page faults per step\n",
                  static_cast<double>(mallocs) / static_cast<double>(o.steps), faults_per_step);
      if (ranks > 1) {
        std::printf("data parallel: %s, %ld sentences each; %.1f MB of gradients summed per step in %zu buckets; "
                    "waiting for the sums: median %.2f ms per step\n",
                    comm->describe().c_str(), static_cast<long>(local_batch), param_bytes / (1 << 20), reducer->buckets(), comm_median);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "qkgrad-bench%s: %s\n", comm && comm->size() > 1 ? cat(" (rank ", comm->rank(), ")").c_str() : "", e.what());
    if (comm && comm->size() > 1) comm->abort_job(1);  // the other ranks would wait for this one
    return 1;
  }
  return 0;
}
