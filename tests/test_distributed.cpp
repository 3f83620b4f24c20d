// Data-parallel training (issue 22, docs/distributed.md). The unit tests run everywhere: the
// autograd hook that tells the reducer a gradient is final, the gradient reducer on one
// process, the ranks' shares of a batch. The tests tagged [mpi] start qkgrad-translate under
// mpirun (hidden from a plain run: scripts/test.sh runs them once, on the release build): 2 and
// 3 ranks against --accumulate and one process, bit-reproducibility, a killed rank, ranks
// started with different options, and resuming with another number of ranks.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.h"
#include "core/autograd.h"
#include "distributed/communicator.h"
#include "distributed/gradient_reducer.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "ops/ops.h"
#include "translation/batching.h"
#include "training/data_parallel.h"

namespace fs = std::filesystem;
using namespace qkgrad;
using namespace qkgrad::test_cli;
using Catch::Matchers::Contains;

TEST_CASE("autograd: the leaf hook sees each leaf once, after the last node that feeds it", "[distributed][autograd]") {
  Tensor a = Tensor::from_vector({1.0, 2.0}, {2}, DType::f64).requires_grad_();
  Tensor b = Tensor::from_vector({3.0, -1.0}, {2}, DType::f64).requires_grad_();
  Tensor unused = Tensor::from_vector({5.0}, {1}, DType::f64).requires_grad_();
  // loss = sum(a * b) + sum(a * a): a is used by three nodes, b by one.
  const Tensor loss = sum(mul(a, b)) + sum(mul(a, a));
  std::map<const TensorImpl*, int> calls;
  std::map<const TensorImpl*, std::vector<double>> grad_when_final;
  backward(loss, Tensor::ones(loss.shape(), loss.dtype()), [&](const Tensor& leaf) {
    ++calls[leaf.impl()];
    grad_when_final[leaf.impl()] = leaf.grad().to_vector();
  });
  CHECK(calls[a.impl()] == 1);
  CHECK(calls[b.impl()] == 1);
  CHECK(calls.count(unused.impl()) == 0);  // no backward reached it
  // What the hook saw is the final gradient: d/da = b + 2a, d/db = a.
  CHECK(grad_when_final[a.impl()] == std::vector<double>{5.0, 3.0});
  CHECK(grad_when_final[b.impl()] == std::vector<double>{1.0, 2.0});
  CHECK(a.grad().to_vector() == std::vector<double>{5.0, 3.0});
}

TEST_CASE("gradient reducer on one process: buckets in reverse parameter order, gradients unchanged, zeros for unreached ones",
          "[distributed]") {
  std::unique_ptr<distributed::Communicator> one = distributed::single_process();
  CHECK(one->size() == 1);
  CHECK(one->rank() == 0);
  std::vector<Tensor> params;
  for (int i = 0; i < 5; ++i) params.push_back(Tensor::full({100}, 0.5 * i, DType::f32).requires_grad_());
  // 100 floats = 400 bytes a parameter; 800-byte buckets hold two (the last one, one).
  distributed::GradientReducer reducer(*one, params, 800);
  CHECK(reducer.buckets() == 3);
  const Tensor loss = sum(mul(params[0], params[1])) + sum(params[3]);  // params 2 and 4 unused
  backward(loss, Tensor::ones(loss.shape(), loss.dtype()), reducer.hook());
  reducer.finish();
  CHECK(params[0].grad().to_vector() == std::vector<double>(100, 0.5));
  CHECK(params[1].grad().to_vector() == std::vector<double>(100, 0.0));
  CHECK(params[3].grad().to_vector() == std::vector<double>(100, 1.0));
  REQUIRE(params[2].grad().defined());  // a rank without data still contributes (zeros)
  CHECK(params[2].grad().to_vector() == std::vector<double>(100, 0.0));
  CHECK(params[4].grad().to_vector() == std::vector<double>(100, 0.0));
}

TEST_CASE("rank shares: rank r of N with --accumulate K runs shares rK .. rK + K - 1 of the N·K", "[distributed]") {
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 11; ++i) indices.push_back(100 + i);
  const auto all = training::split_shares(indices, 6);
  for (int rank = 0; rank < 3; ++rank) {
    const auto mine = training::rank_shares(indices, rank, 3, 2);
    REQUIRE(mine.size() == 2);
    CHECK(mine[0] == all[static_cast<std::size_t>(2 * rank)]);
    CHECK(mine[1] == all[static_cast<std::size_t>(2 * rank + 1)]);
  }
  // Every pair in exactly one share; empty shares when there are fewer pairs than shares.
  CHECK(training::rank_shares({7}, 1, 2, 1) == std::vector<std::vector<int64_t>>{{7}});
  CHECK(training::rank_shares({7}, 0, 2, 1) == std::vector<std::vector<int64_t>>{{}});
}

namespace {
// Rank 1 of a 2-rank job whose rank 0 sent `root_text` and says whether it differed.
class ScriptedRank1 final : public distributed::Communicator {
 public:
  explicit ScriptedRank1(std::string root_text) : root_text_(std::move(root_text)) {}
  int rank() const override { return 1; }
  int size() const override { return 2; }
  std::string describe() const override { return "scripted"; }
  std::unique_ptr<distributed::PendingSum> start_sum(Tensor) override { return nullptr; }
  void sum(std::vector<double>&) override {}  // rank 0 agreed: it adds nothing
  void broadcast(std::string& bytes, int) override { bytes = root_text_; }
  void barrier() override {}
  [[noreturn]] void abort_job(int) override { std::abort(); }

 private:
  std::string root_text_;
};
}  // namespace

TEST_CASE("ranks that read different data refuse to start, each naming what differs", "[distributed]") {
  const Json root = {{"train pairs", 200}, {"train text", "00aa"}, {"dev pairs", 50}};
  ScriptedRank1 same(root.dump());
  CHECK_NOTHROW(training::require_same_as_root(same, root, "data"));
  ScriptedRank1 other(root.dump());
  const Json mine = {{"train pairs", 200}, {"train text", "00bb"}, {"dev pairs", 50}};
  CHECK_THROWS_AS(training::require_same_as_root(other, mine, "data"), training::JobWideError);
  CHECK_THROWS_WITH(training::require_same_as_root(other, mine, "data"),
                    Contains("the 2 ranks of this job were started with different data") && Contains("1 rank differs"));
  // The fingerprints of two corpora that differ in one line differ.
  CHECK(training::fingerprint({"uno dos", "tres"}) != training::fingerprint({"uno dos", "tres."}));
  CHECK(training::fingerprint({"ab", "c"}) != training::fingerprint({"a", "bc"}));
}

TEST_CASE("without a launcher a process is a single process", "[distributed]") {
  if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr) return;  // run under a launcher
  CHECK(distributed::launched_ranks() == 1);
  CHECK(distributed::from_launcher()->describe() == "single process");
}

// ---- under mpirun ----
namespace {

bool have_mpirun() {
  return distributed::built_with_mpi() && std::system("command -v mpirun > /dev/null 2>&1") == 0;
}

// `mpirun -np N qkgrad-translate ARGS`: as root when CI is (Open MPI refuses root unless told),
// more ranks than cores allowed, the shared-memory transport (no network), and no
// single-copy mechanism (containers forbid the ptrace it needs).
Result mpirun(int ranks, const std::string& args) {
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  ::setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 1);
  return run_shell("mpirun --mca btl self,vader -np " + std::to_string(ranks) + " " + kProgram + " " + args + " 2>&1");
}

// True (after saying so) when this build or machine cannot run the mpirun tests.
bool skip_without_mpirun() {
  if (have_mpirun()) return false;
  WARN("skipped: built without MPI, or no mpirun");
  return true;
}

const std::string kTiny = " --preset tiny --vocab-size 30 --threads 1 --eval-every 10 --eval-sentences 4 --log-every 1 ";

std::vector<std::pair<std::string, Tensor>> weights(const std::string& run) {
  return safetensors::load(run + "/checkpoints/last/model.safetensors").tensors;
}

// The largest difference of two runs' parameters, relative to each tensor's largest value.
double parameter_difference(const std::string& run_a, const std::string& run_b) {
  const auto a = weights(run_a), b = weights(run_b);
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].first == b[i].first);
    const std::vector<double> x = a[i].second.to_vector(), y = b[i].second.to_vector();
    double diff = 0, scale = 1e-30;
    for (std::size_t j = 0; j < x.size(); ++j) {
      diff = std::max(diff, std::abs(x[j] - y[j]));
      scale = std::max(scale, std::abs(x[j]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// train_loss of every logged step (metrics.jsonl, rank 0's).
std::vector<double> train_losses(const std::string& run) {
  std::vector<double> losses;
  std::istringstream lines(read(run + "/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const Json j = parse_json(line, run + "/metrics.jsonl");
    if (j.contains("train_loss")) losses.push_back(j.at("train_loss").get<double>());
  }
  return losses;
}

double loss_difference(const std::string& run_a, const std::string& run_b) {
  const std::vector<double> a = train_losses(run_a), b = train_losses(run_b);
  REQUIRE(a.size() == b.size());
  REQUIRE(!a.empty());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::abs(b[i]));
  return worst;
}

}  // namespace

TEST_CASE("mpirun: N ranks = --accumulate N = one process with the same global batch; N ranks are bit-reproducible",
          "[.mpi]") {
  if (skip_without_mpirun()) return;
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string flags = "--data " + tmp.path + kTiny + "--max-steps 20 --dropout 0";
  Result r = run("train --run " + tmp / "one" + " " + flags);
  REQUIRE(r.status == 0);
  for (int n : {2, 3}) {
    const std::string ranks = tmp / ("ranks" + std::to_string(n)), accumulate = tmp / ("accumulate" + std::to_string(n));
    r = mpirun(n, "train --run " + ranks + " " + flags);
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.output, Contains("data parallel: MPI (") && Contains(std::to_string(n) + " ranks; each takes 1 of the " +
                                                                      std::to_string(n) + " shares of every batch"));
    r = run("train --run " + accumulate + " " + flags + " --accumulate " + std::to_string(n));
    REQUIRE(r.status == 0);
    // Only the order of float32 additions differs: measured about 1e-8 on the losses and 2e-6
    // on the parameters (Adam's first steps divide by tiny second moments) after 20 steps.
    CHECK(loss_difference(ranks, tmp / "one") <= 1e-5);
    CHECK(loss_difference(ranks, accumulate) <= 1e-5);
    CHECK(parameter_difference(ranks, tmp / "one") <= 1e-4);
    CHECK(parameter_difference(ranks, accumulate) <= 1e-4);
  }
  // The same N and seed: the same bits (every sum is in rank order, the same on every rank).
  r = mpirun(2, "train --run " + tmp / "again" + " " + flags);
  REQUIRE(r.status == 0);
  CHECK(parameter_difference(tmp / "again", tmp / "ranks2") == 0);
  CHECK(train_losses(tmp / "again") == train_losses(tmp / "ranks2"));
  // Rank 0 alone wrote the run: one options.json, metrics with the communication time.
  CHECK_THAT(read(tmp / "again/metrics.jsonl"), Contains("\"comm_ms_per_step\""));
}

TEST_CASE("mpirun: with dropout, 2 ranks draw the masks --accumulate 2 draws (each share its own)", "[.mpi]") {
  if (skip_without_mpirun()) return;
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string flags = "--data " + tmp.path + kTiny + "--max-steps 12 --dropout 0.2";
  Result r = mpirun(2, "train --run " + tmp / "ranks" + " " + flags);
  INFO(r.output);
  REQUIRE(r.status == 0);
  r = run("train --run " + tmp / "accumulate" + " " + flags + " --accumulate 2");
  REQUIRE(r.status == 0);
  CHECK(loss_difference(tmp / "ranks", tmp / "accumulate") <= 1e-5);
  CHECK(parameter_difference(tmp / "ranks", tmp / "accumulate") <= 1e-4);
}

TEST_CASE("mpirun: a run resumes with another number of ranks (1 -> 2 -> 1) and ends where one process ends", "[.mpi]") {
  if (skip_without_mpirun()) return;
  TempDir tmp;
  write_corpus(tmp.path, 200);
  // Evaluations every 4 steps, so that the evaluations at the end of each part (which drive the
  // plateau schedule) are those of the whole run.
  const std::string flags = "--data " + tmp.path + kTiny + "--dropout 0 --eval-every 4";
  Result r = run("train --run " + tmp / "whole" + " " + flags + " --max-steps 24");
  REQUIRE(r.status == 0);
  r = run("train --run " + tmp / "mixed" + " " + flags + " --max-steps 8");
  REQUIRE(r.status == 0);
  r = mpirun(2, "train --run " + tmp / "mixed" + " --resume --max-steps 16");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("resumed from") && Contains("at step 8"));
  r = run("train --run " + tmp / "mixed" + " --resume --max-steps 24");
  REQUIRE(r.status == 0);
  CHECK(load_trainer_state(tmp / "mixed/checkpoints/last").get_int("step") == 24);
  CHECK(loss_difference(tmp / "mixed", tmp / "whole") <= 1e-5);
  CHECK(parameter_difference(tmp / "mixed", tmp / "whole") <= 1e-4);
}

TEST_CASE("mpirun: a killed rank ends the job within seconds, naming the rank; the checkpoint is intact and resumes",
          "[.mpi]") {
  if (skip_without_mpirun()) return;
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const auto start = std::chrono::steady_clock::now();
  Result r = mpirun(2, "train --run " + tmp / "run" + " --data " + tmp.path + kTiny +
                           "--max-steps 40 --save-every 5 --inject-rank-death-at-step 13");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(seconds < 60);  // no hang: mpirun ends the other rank
  CHECK_THAT(r.output, Contains("rank 1") && Contains("signal 9"));            // mpirun names the rank
  CHECK_THAT(r.output, Contains("is intact") && Contains("plus --resume"));  // and we say what to do
  CHECK(load_trainer_state(tmp / "run/checkpoints/last").get_int("step") == 10);
  r = run("train --run " + tmp / "run" + " --resume --threads 1");  // on one process
  CHECK(r.status == 0);
  CHECK(load_trainer_state(tmp / "run/checkpoints/last").get_int("step") == 40);
}

TEST_CASE("mpirun: ranks started with different options refuse to start, naming the difference; nothing is made",
          "[.mpi]") {
  if (skip_without_mpirun()) return;
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string one = kProgram + " train --run " + tmp / "run" + " --data " + tmp.path + kTiny + "--max-steps 4";
  // Open MPI's MPMD form: rank 0 with one command line, rank 1 with another.
  Result r = mpirun(1, "train --run " + tmp / "run" + " --data " + tmp.path + kTiny + "--max-steps 4 --lr 0.001 : -np 1 " + one +
                           " --lr 0.002");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("(rank 1 of 2): its options differ from rank 0's: lr 0.002 (rank 0: 0.001)"));
  CHECK_THAT(r.output, Contains("were started with different options") && Contains("Nothing was started"));
  CHECK(!fs::exists(tmp / "run"));
}

TEST_CASE("mpirun: the other commands refuse to run as several ranks", "[.mpi]") {
  if (skip_without_mpirun()) return;
  const Result r = mpirun(2, "bleu --help");
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Contains("only `train` runs data-parallel"));
}
