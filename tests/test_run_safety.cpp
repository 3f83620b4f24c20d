// Reliability, second round (issue 17): nothing a signal, a second process, a non-finite value,
// a stale path or a careless command line does may lose a user's run or give a wrong answer
// silently. Each case asserts the exit status, the message, and that nothing was lost or left
// half-written. docs/reliability.md lists the guarantees and names these tests.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/autograd.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "reliability_helpers.h"
#include "translation/subwords.h"

using namespace qkgrad;
using namespace qkgrad::test_cli;

namespace {

using Clock = std::chrono::steady_clock;

// Waits (up to 60 s) until `ready()` holds; false on the time-out.
template <typename F>
bool wait_until(F ready) {
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (!ready()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The exit status of a background run (128 + the signal if it died by one).
int wait_status(pid_t child) {
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A training that runs until it is stopped (its checkpoint every 200 steps).
std::vector<std::string> endless_train(const std::string& data, const std::string& run) {
  return {"train", "--data", data, "--run", run, "--preset", "tiny", "--vocab-size", "30", "--max-steps", "1000000",
          "--eval-every", "200", "--eval-sentences", "2", "--threads", "1"};
}

// The process ids of the children of `pid` (Linux /proc).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::istringstream in(read(cat("/proc/", pid, "/task/", pid, "/children")));
  for (pid_t c; in >> c;) out.push_back(c);
  return out;
}
bool process_gone(pid_t pid) {  // no such process, or a zombie nobody will run again
  const std::string stat = read(cat("/proc/", pid, "/stat"));
  return stat.empty() || stat.find(") Z ") != std::string::npos;
}

// Runs qkgrad-translate ARGS (output to `log`) and returns its exit status and its peak resident
// memory in KiB, read from /proc/PID/status (VmHWM, a high-water mark) until it exits. (The
// rusage of a child would count the test process itself: a forked child starts with the
// parent's resident pages.)
std::pair<int, long> run_measuring_memory(const std::vector<std::string>& args, const std::string& log) {
  const pid_t child = spawn(args, log);
  long peak = 0;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  for (int status = 0;;) {
    // Only once it runs the program: until its exec, the forked child is a copy of this test.
    std::istringstream in(read(cat("/proc/", child, "/status")));
    bool program = false;
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Name:", 0) == 0) program = line.find("qkgrad-transl") != std::string::npos;
      if (program && line.rfind("VmHWM:", 0) == 0) peak = std::max(peak, std::stol(line.substr(6)));
    }
    if (::waitpid(child, &status, WNOHANG) == child) return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), peak};
    if (Clock::now() > deadline) ::kill(child, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Rewrites DIR/FILE (a safetensors file of a checkpoint) with `edit` applied to its contents.
template <typename F>
void edit_safetensors(const std::string& path, F edit) {
  safetensors::Contents c = safetensors::load(path);
  edit(c);
  safetensors::save(path, c.tensors, c.metadata);
}

// A corpus of other words (and so other subwords) than write_corpus's.
void write_other_corpus(const std::string& dir, int lines) {
  const char* es[] = {"rojo", "verde", "azul", "negro", "blanco"};
  const char* en[] = {"red", "green", "blue", "black", "white"};
  for (const char* split : {"train", "dev", "test"}) {
    std::string s, t;
    for (int i = 0; i < lines; ++i) {
      s += cat(es[i % 5], " ", es[(i / 5) % 5], "\n");
      t += cat(en[i % 5], " ", en[(i / 5) % 5], "\n");
    }
    write(dir + "/" + split + ".es", s);
    write(dir + "/" + split + ".en", t);
  }
}

// Enough distinct text that SentencePiece trains for several seconds (vocabulary 8000).
void write_slow_subword_corpus(const std::string& dir) {
  fs::create_directories(dir);
  std::string es, en;
  for (int i = 0; i < 60000; ++i) {
    es += cat("palabra", i % 7919, " texto", (i * 31) % 6007, " numero", i, "\n");
    en += cat("word", i % 7919, " text", (i * 31) % 6007, " number", i, "\n");
  }
  for (const char* split : {"train", "dev", "test"}) {
    write(dir + "/" + split + ".es", es);
    write(dir + "/" + split + ".en", en);
  }
}

}  // namespace

TEST_CASE("run safety: SIGTERM and SIGHUP save a checkpoint like Ctrl-C, and exit with 128 + the signal",
          "[reliability]") {
  for (const int sig : {SIGTERM, SIGHUP}) {
    const std::string name = sig == SIGTERM ? "SIGTERM" : "SIGHUP";
    DYNAMIC_SECTION(name) {
      TempDir tmp;
      const std::string run = tmp / "run", log = tmp / "log";
      const pid_t child = spawn(endless_train(trained().data, run), log);
      REQUIRE(wait_until([&] { return checkpoint_step(run + "/checkpoints/last") >= 200; }));
      ::kill(child, sig);
      const int status = wait_status(child);
      INFO(read(log));
      CHECK(status == 128 + sig);
      const int64_t saved = checkpoint_step(run + "/checkpoints/last");
      CHECK(saved > 200);  // the step it was at, not the last evaluation's
      CHECK_THAT(read(log), Contains(cat("interrupted by ", name, " at step ", saved, "; saved ", run, "/checkpoints/last")));
      CHECK(entries_containing(run, ".tmp").empty());
      std::vector<std::string> resume = train_args(trained().data, run, saved + 5);
      resume.push_back("--resume");
      expect_exit(qk(resume), 0, {cat("resumed from ", run, "/checkpoints/last at step ", saved)});
    }
  }
}

namespace {

// Whether the thread `task` of process `pid` has SIGINT, SIGTERM and SIGHUP all blocked (its
// SigBlk line in /proc). A thread waiting in sigwait() for them shows them unblocked.
bool blocks_stop_signals(pid_t pid, const std::string& task) {
  std::istringstream status(read(cat("/proc/", pid, "/task/", task, "/status")));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
    const unsigned long long stop = (1ull << (SIGINT - 1)) | (1ull << (SIGTERM - 1)) | (1ull << (SIGHUP - 1));
    return (mask & stop) == stop;
  }
  return false;
}

}  // namespace

// No handler may run on top of a computing thread (training/stop_signals.h says why): every
// thread of a training run but one blocks the stop signals, and that one waits for them.
TEST_CASE("run safety: while training, every thread but the signal watcher blocks the stop signals",
          "[reliability]") {
  TempDir tmp;
  const std::string run = tmp / "run";
  std::vector<std::string> args = endless_train(trained().data, run);
  args.back() = "2";  // --threads 2: OpenMP's worker threads exist too
  args.insert(args.end(), {"--save-every", "5"});
  const pid_t child = spawn(args, tmp / "log");
  REQUIRE(wait_until([&] { return checkpoint_step(run + "/checkpoints/last") >= 5; }));
  std::vector<std::string> tasks;
  for (const auto& e : fs::directory_iterator(cat("/proc/", child, "/task"))) tasks.push_back(e.path().filename());
  int unblocked = 0;
  for (const std::string& task : tasks) unblocked += blocks_stop_signals(child, task) ? 0 : 1;
  INFO(tasks.size() << " threads");
  CHECK(tasks.size() >= 3);  // the main thread, an OpenMP worker, the watcher
  CHECK(unblocked == 1);
  ::kill(child, SIGTERM);
  CHECK(wait_status(child) == 143);
}

TEST_CASE("run safety: a signal while the subwords train stops SentencePiece and leaves nothing; SIGKILL takes it down too",
          "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data";
  write_slow_subword_corpus(data);
  auto args = [&](const std::string& run) {
    return std::vector<std::string>{"train", "--data", data, "--run", run, "--preset", "tiny", "--vocab-size", "8000",
                                    "--max-steps", "10", "--threads", "1"};
  };
  for (const int sig : {SIGTERM, SIGKILL}) {
    DYNAMIC_SECTION((sig == SIGTERM ? "SIGTERM" : "SIGKILL")) {
      const std::string run = tmp / cat("run", sig), log = tmp / cat("log", sig);
      const pid_t child = spawn(args(run), log);
      std::vector<pid_t> helpers;
      REQUIRE(wait_until([&] { return !(helpers = children_of(child)).empty(); }));  // SentencePiece runs
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      const auto sent = Clock::now();
      ::kill(child, sig);
      const int status = wait_status(child);
      const double seconds = std::chrono::duration<double>(Clock::now() - sent).count();
      INFO(read(log));
      CHECK(status == 128 + sig);
      CHECK(seconds < 5);
      // The child died with its parent, and wrote nothing after it.
      for (const pid_t h : helpers) CHECK(wait_until([&] { return process_gone(h); }));
      if (sig == SIGTERM) {
        CHECK_THAT(read(log), Contains("interrupted by SIGTERM while training the subwords"));
        CHECK_FALSE(exists(run));  // a new run interrupted before its first checkpoint leaves nothing
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        CHECK(entries_containing(run, "subwords").empty());  // no model, no temporaries
      }
    }
  }
}

TEST_CASE("run safety: a second process on the same run directory is refused at once, naming the first",
          "[reliability]") {
  TempDir tmp;
  const std::string run = tmp / "run", log = tmp / "log";
  const std::vector<std::string> first_args = endless_train(trained().data, run);
  const pid_t first = spawn(first_args, log);
  // While the first one is still before its first checkpoint: a second new run.
  REQUIRE(wait_until([&] { return !read(run + "/train.lock").empty(); }));  // locked, its pid written
  const std::string refused = cat("is in use by another training process (pid ", first, ")");
  expect_exit(qk(first_args), 1, {run, refused, "nothing was changed"});
  // Once it has checkpoints: a resume, while the first one trains on.
  REQUIRE(wait_until([&] { return checkpoint_step(run + "/checkpoints/last") >= 200; }));
  std::vector<std::string> resume = first_args;
  resume.push_back("--resume");
  expect_exit(qk(resume), 1, {refused});
  ::kill(first, SIGTERM);
  CHECK(wait_status(first) == 143);
  // The first run is whole: its metrics rise step by step, once each, and it resumes.
  std::set<std::string> seen;
  int64_t previous = 0;
  const std::string text = read(run + "/metrics.jsonl");
  for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = text.substr(start, end - start);
    CHECK(seen.insert(line).second);
    const int64_t step = JsonFields(parse_json(line, "metrics.jsonl"), "metrics.jsonl").integer("step");
    CHECK(step >= previous);
    previous = step;
  }
  const int64_t saved = checkpoint_step(run + "/checkpoints/last");
  resume = train_args(trained().data, run, saved + 5);
  resume.push_back("--resume");
  expect_exit(qk(resume), 0, {"resumed from"});  // the lock went with the first process
}

TEST_CASE("run safety: a second process is told about the first even while the first writes its subwords",
          "[reliability]") {
  // The first process holds the lock and SentencePiece is writing its temporaries: a second new
  // run names the first process (CI once saw it complain about the temporaries instead).
  TempDir tmp;
  const std::string run = tmp / "run";
  fs::create_directories(run);
  const int fd = ::open((run + "/train.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  const std::string pid = cat(::getpid(), "\n");
  REQUIRE(::pwrite(fd, pid.data(), pid.size(), 0) == static_cast<ssize_t>(pid.size()));
  write(run + cat("/subwords.tmp-", ::getpid(), ".model"), "half written");
  expect_exit(qk(train_args(trained().data, run, 2)), 1,
              {cat("is in use by another training process (pid ", ::getpid(), ")"), "nothing was changed"});
  CHECK(read(run + "/subwords.tmp-" + std::to_string(::getpid()) + ".model") == "half written");
  ::close(fd);
}

TEST_CASE("run safety: a new run that fails removes only what it made, not a sibling run under the same new parent",
          "[reliability]") {
  TempDir tmp;
  write_slow_subword_corpus(tmp / "slow");
  const std::string a = tmp / "exp/a", b = tmp / "exp/b";  // exp/ does not exist yet
  const pid_t first = spawn({"train", "--data", tmp / "slow", "--run", a, "--preset", "tiny", "--vocab-size", "8000",
                             "--max-steps", "10", "--threads", "1"},
                            tmp / "log-a");
  REQUIRE(wait_until([&] { return !children_of(first).empty(); }));  // a has made exp/a, and trains subwords
  std::vector<std::string> second_args = endless_train(trained().data, b);
  second_args.insert(second_args.end(), {"--save-every", "5"});
  const pid_t second = spawn(second_args, tmp / "log-b");
  REQUIRE(wait_until([&] { return checkpoint_step(b + "/checkpoints/last") >= 5; }));
  ::kill(first, SIGTERM);  // a ends before its first checkpoint: it cleans up
  CHECK(wait_status(first) == 143);
  CHECK_FALSE(exists(a));
  CHECK(checkpoint_step(b + "/checkpoints/last") >= 5);  // b's run is whole, and b trains on
  CHECK(exists(b + "/options.json"));
  ::kill(second, SIGTERM);
  CHECK(wait_status(second) == 143);
  INFO(read(tmp / "log-b"));
  CHECK(checkpoint_step(b + "/checkpoints/last") >= 5);
}

TEST_CASE("run safety: nothing non-finite is saved, and loading names the first non-finite tensor", "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  const std::string last = run + "/checkpoints/last", best = run + "/checkpoints/best";

  SECTION("a NaN in an optimizer moment: --resume refuses, and the checkpoint is not touched") {
    std::string poisoned;
    edit_safetensors(last + "/trainer.safetensors", [&](safetensors::Contents& c) {
      for (auto& [name, t] : c.tensors) {
        if (name.rfind("exp_avg_sq.", 0) == 0 && t.numel() > 3) {
          t.data<float>()[3] = NAN;
          poisoned = name;
          break;
        }
      }
    });
    REQUIRE_FALSE(poisoned.empty());
    const std::string before = read(last + "/trainer.safetensors") + read(last + "/model.safetensors");
    std::vector<std::string> resume = train_args(trained().data, run, 40);
    resume.push_back("--resume");
    expect_exit(qk(resume), 1, {"cannot continue from " + last, "tensor '" + poisoned + "'", "NaN at element 3"});
    CHECK(read(last + "/trainer.safetensors") + read(last + "/model.safetensors") == before);
  }
  SECTION("an infinite weight: translate and eval refuse, naming it, and write nothing") {
    std::string poisoned;
    edit_safetensors(best + "/model.safetensors", [&](safetensors::Contents& c) {
      c.tensors[1].second.data<float>()[0] = INFINITY;
      poisoned = c.tensors[1].first;
    });
    write(tmp / "in.txt", "uno dos\n");
    expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
                {"tensor '" + poisoned + "'", "+inf at element 0", "move " + best + " away"});
    CHECK_FALSE(exists(tmp / "out.txt"));
    expect_exit(qk({"eval", "--run", run}), 1, {"tensor '" + poisoned + "'"});
    CHECK_FALSE(exists(run + "/test.hyp"));
  }
  SECTION("save_checkpoint refuses a non-finite model or optimizer state and keeps the previous checkpoint") {
    Seq2SeqTransformer model(load_checkpoint_config(last));
    load_model_weights(last, model);
    TrainerState state = load_trainer_state(last);
    const std::string before = read(last + "/model.safetensors");
    state.optimizer_state[0].second.data<float>()[0] = NAN;
    CHECK_THROWS_AS(save_checkpoint(last, model, &state), NonFiniteState);
    CHECK_THROWS_WITH(save_checkpoint(last, model, &state),
                      Contains("the optimizer state: tensor '" + state.optimizer_state[0].first + "'") &&
                          Contains("nothing was written"));
    {
      NoGradGuard no_grad;
      Tensor w = model.named_parameters()[0].second;
      w.fill_(-INFINITY);
    }
    CHECK_THROWS_WITH(save_checkpoint(last, model, nullptr), Contains("the model: tensor") && Contains("-inf at element 0"));
    CHECK(read(last + "/model.safetensors") == before);
    CHECK(entries_containing(run, ".tmp").empty());
  }
  SECTION("the trainer state's numbers are checked like its tensors: a NaN is neither saved nor resumed from") {
    Seq2SeqTransformer model(load_checkpoint_config(last));
    load_model_weights(last, model);
    TrainerState state = load_trainer_state(last);
    const std::string before = read(last + "/trainer.safetensors");
    state.set_double("best_value", NAN);
    CHECK_THROWS_AS(save_checkpoint(last, model, &state), NonFiniteState);
    CHECK_THROWS_WITH(save_checkpoint(last, model, &state),
                      Contains("the trainer state: value 'best_value' is nan") && Contains("nothing was written"));
    CHECK(read(last + "/trainer.safetensors") == before);
    // A damaged file: every number is checked on loading, also one that no counter reads.
    const safetensors::Metadata original = safetensors::load(last + "/trainer.safetensors").metadata;
    for (const char* key : {"best_value", "schedule.scale", "an_unknown_value"}) {
      INFO(key);
      edit_safetensors(last + "/trainer.safetensors", [&](safetensors::Contents& c) { c.metadata[key] = "-inf"; });
      CHECK_THROWS_WITH(load_trainer_state(last), Contains("value '" + std::string(key) + "' is -inf"));
      std::vector<std::string> resume = train_args(trained().data, run, 40);
      resume.push_back("--resume");
      expect_exit(qk(resume), 1, {"cannot continue from " + last, "'" + std::string(key) + "' is -inf"});
      edit_safetensors(last + "/trainer.safetensors", [&](safetensors::Contents& c) { c.metadata = original; });
    }
  }
}

TEST_CASE("run safety: damaged trainer counters, oversized configs and another run's checkpoint are refused",
          "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  const std::string last = run + "/checkpoints/last", best = run + "/checkpoints/best";
  std::vector<std::string> resume = train_args(trained().data, run, 40);
  resume.push_back("--resume");

  for (const auto& edit : std::vector<std::pair<std::string, std::string>>{
           {"position", "-1"}, {"step", "-100"}, {"best_value", "nan"}, {"evals_since_best", "99999"}}) {
    const std::string key = edit.first, value = edit.second;  // (clang 14: no lambda captures of bindings)
    INFO(key << " = " << value);
    const std::string original = read(last + "/trainer.safetensors");
    edit_safetensors(last + "/trainer.safetensors", [&](safetensors::Contents& c) { c.metadata[key] = value; });
    expect_exit(qk(resume), 1, {"cannot continue from " + last, "'" + key + "' is "});
    write(last + "/trainer.safetensors", original);
  }

  write(tmp / "in.txt", "uno dos\n");
  const std::string config_path = best + "/config.json", config_text = read(config_path);
  for (const auto& [field, value, says] : std::vector<std::tuple<std::string, int64_t, std::string>>{
           {"ffn", int64_t{1} << 40, "\"ffn\" is 1099511627776, more than the largest supported"},
           {"encoder_layers", 100000000, "\"encoder_layers\" is 100000000, more than the largest supported"},
           {"ffn", 500000, "has only"}}) {
    INFO(field << " = " << value);
    Json config = parse_json(config_text, config_path);
    config["model"][field] = value;
    write(config_path, dump_json(config, 2));
    expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
                {config_path, says});
    CHECK_FALSE(exists(tmp / "out.txt"));
  }
  write(config_path, config_text);

  // A best checkpoint of another run with the same vocabulary size but other subwords.
  const std::string other_data = tmp / "other-data", other = tmp / "other";
  fs::create_directories(other_data);
  write_other_corpus(other_data, 400);
  expect_exit(qk({"train", "--data", other_data, "--run", other, "--preset", "tiny", "--vocab-size", "30", "--max-steps",
                  "10", "--eval-every", "10", "--eval-sentences", "1", "--threads", "1"}),
              0, {});
  fs::remove_all(best);
  fs::copy(other + "/checkpoints/best", best);
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
              {best + " was trained with another subword model than " + run + "/subwords.model"});
  CHECK_FALSE(exists(tmp / "out.txt"));
}

TEST_CASE("run safety: a checkpoint of another run with the same vocabulary loads and averages; old runs still load",
          "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  // The same corpus under another path: its own SentencePiece training, whose file differs in
  // the bytes (the input paths it records), not in the pieces.
  const std::string data = tmp / "same-data", other = tmp / "other";
  fs::copy(trained().data, data, fs::copy_options::recursive);
  expect_exit(qk(train_args(data, other, 10)), 0, {});
  CHECK(read(run + "/subwords.model") != read(other + "/subwords.model"));
  write(tmp / "in.txt", "uno dos\n");
  const std::string best = run + "/checkpoints/best";
  fs::remove_all(best);
  fs::copy(other + "/checkpoints/best", best, fs::copy_options::recursive);
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 0, {});
  CHECK(exists(tmp / "out.txt"));
  expect_exit(qk({"average", "--checkpoints", run + "/checkpoints/last," + other + "/checkpoints/last", "--out",
                  tmp / "avg"}),
              0, {"averaged 2 checkpoints"});
  expect_exit(qk({"eval", "--run", run, "--checkpoint", tmp / "avg"}), 0, {"BLEU"});

  // A run from before 2026-12-04: its checkpoints name the vocabulary by the file's hash. It
  // translates, resumes, and its new checkpoints keep that name.
  const std::string old = copy_of_trained_run(tmp / "old");
  const std::string file_id = translation::Subwords(old + "/subwords.model").file_fingerprint();
  for (const char* which : {"best", "last"}) {
    const std::string config_path = old + "/checkpoints/" + which + "/config.json";
    Json config = parse_json(read(config_path), config_path);
    config["model"]["vocabulary_id"] = file_id;
    write(config_path, dump_json(config, 2));
  }
  expect_exit(qk({"translate", "--run", old, "--input", tmp / "in.txt", "--output", tmp / "old.txt"}), 0, {});
  std::vector<std::string> resume = train_args(trained().data, old, 30);
  resume.push_back("--resume");
  expect_exit(qk(resume), 0, {"resumed from"});
  CHECK(checkpoint_step(old + "/checkpoints/last") == 30);
  CHECK(load_checkpoint_config(old + "/checkpoints/last").vocabulary_id == file_id);
}

TEST_CASE("run safety: eval from another directory scores the run's own data", "[reliability]") {
  TempDir tmp;
  fs::create_directories(tmp / "a/data");
  fs::create_directories(tmp / "b/data");
  write_corpus(tmp / "a/data", 40);
  write_corpus(tmp / "b/data", 1);  // a data/ of its own, one sentence
  Command train{{"train", "--data", "data", "--run", "run", "--preset", "tiny", "--vocab-size", "30", "--max-steps", "10",
                 "--eval-every", "10", "--eval-sentences", "1", "--threads", "1"}};
  train.cwd = tmp / "a";
  expect_exit(run_command(train), 0, {});
  const Json options = parse_json(read(tmp / "a/run/options.json"), "options.json");
  CHECK(options.at("data") == tmp / "a/data");  // absolute
  Command eval{{"eval", "--run", "../a/run"}};
  eval.cwd = tmp / "b";
  expect_exit(run_command(eval), 0, {"(40 sentences"});
  const std::string hyp = read(tmp / "a/run/test.hyp");
  CHECK(std::count(hyp.begin(), hyp.end(), '\n') == 40);
}

TEST_CASE("run safety: a --run that is a file or a checkpoint, a folder of other files, a symlink loop: each named",
          "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  write(tmp / "in.txt", "uno dos\n");
  // A file given as the run directory.
  expect_exit(qk({"translate", "--run", tmp / "in.txt", "--input", tmp / "in.txt"}), 1,
              {"--run " + tmp / "in.txt" + " is a file, not a run directory"});
  // A checkpoint given as the run directory: the --checkpoint to use instead.
  expect_exit(qk({"translate", "--run", run + "/checkpoints/best", "--input", tmp / "in.txt"}), 1,
              {"is a checkpoint, not a run directory: use --run " + run + " --checkpoint best"});
  expect_exit(qk({"eval", "--run", run + "/checkpoints/last"}), 1, {"use --run " + run + " --checkpoint last"});
  // A new run into a folder that holds another program's files: refused, nothing added.
  const std::string folder = tmp / "papers";
  fs::create_directories(folder);
  write(folder + "/draft.tex", "x");
  expect_exit(qk(train_args(trained().data, folder, 2)), 1,
              {"--run " + folder + " holds files that are not a training run's (draft.tex)", "Nothing was written"});
  CHECK(std::distance(fs::directory_iterator(folder), fs::directory_iterator()) == 1);
  // ... but an empty one, or one holding only a subwords.model to use, is fine.
  fs::create_directories(tmp / "empty");
  expect_exit(qk(train_args(trained().data, tmp / "empty", 2)), 0, {});
  // A corpus file that is a symbolic link loop is named as one.
  const std::string data = tmp / "looped";
  fs::copy(trained().data, data, fs::copy_options::recursive);
  fs::remove(data + "/train.es");
  fs::create_symlink("b", data + "/a");
  fs::create_symlink("a", data + "/b");
  fs::create_symlink("a", data + "/train.es");
  expect_exit(qk(train_args(data, tmp / "looped-run", 2)), 1, {"train.es", "leads back to itself"});
  CHECK_FALSE(exists(tmp / "looped-run"));
}

TEST_CASE("run safety: an output that cannot be written is refused before the work", "[reliability]") {
  TempDir tmp;
  std::string input;
  for (int i = 0; i < 50; ++i) input += "uno dos tres\n";
  write(tmp / "in.txt", input);
  const std::string run = trained().run;
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "missing/out.txt"}), 1,
              {"translate: --output " + tmp / "missing/out.txt", "the directory '" + tmp / "missing" + "' does not exist"});
  CHECK_FALSE(exists(tmp / "missing"));
  fs::create_directories(tmp / "dir");
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "dir"}), 1, {"is a directory"});
  expect_exit(qk({"attention-stats", "--run", run, "--out", tmp / "missing/stats.jsonl"}), 1, {"does not exist"});
  expect_exit(qk({"grads", "--run", run, "--src", tmp / "in.txt", "--tgt", tmp / "in.txt", "--out", tmp / "dir"}), 1,
              {"is a directory"});

  // eval in a run directory that is read-only (a read-only bind mount: it binds root too).
  const std::string copy = copy_of_trained_run(tmp / "run");
  const std::string why = private_mounts();
  if (!why.empty() || ::mount(copy.c_str(), copy.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    WARN("cannot make a read-only mount here (" << (why.empty() ? std::strerror(errno) : why) << "); skipped");
    return;
  }
  const bool read_only = ::mount(nullptr, copy.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) == 0;
  if (read_only) {
    expect_exit(qk({"eval", "--run", copy, "--data", trained().data}), 1,
                {"eval: the translations " + copy + "/test.hyp", "Read-only file system", "nothing was done"});
  } else {
    WARN("cannot remount read-only: " << std::strerror(errno) << "; skipped");
  }
  ::umount2(copy.c_str(), MNT_DETACH);
}

TEST_CASE("run safety: what a trainer killed mid-save left is removed by the next start or save, zombies included",
          "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  const std::string ckpts = run + "/checkpoints";
  // A half-written checkpoint of a killed trainer whose pid now names a live, unrelated process
  // (here init, pid 1), one of a dead pid, a moved-aside previous checkpoint beside a complete
  // one, and an entry that is not a trainer's (kept).
  const std::string live_pid = "1", gone = std::to_string(dead_pid());
  for (const std::string& leftover : {"last.tmp-" + live_pid, "step-10.tmp-" + gone, "best.old-" + live_pid,
                                      "mine.tmp-" + gone}) {
    fs::create_directories(ckpts + "/" + leftover);
    write(ckpts + "/" + leftover + "/model.safetensors", std::string(1 << 20, 'x'));
  }
  std::vector<std::string> resume = train_args(trained().data, run, 30);
  resume.push_back("--resume");
  expect_exit(qk(resume), 0, {"removed what a training process killed while saving left in " + ckpts, "last.tmp-1",
                              "step-10.tmp-" + gone, "best.old-1"});
  for (const std::string& removed : {"last.tmp-" + live_pid, "step-10.tmp-" + gone, "best.old-" + live_pid}) {
    CHECK_FALSE(exists(ckpts + "/" + removed));
  }
  CHECK(exists(ckpts + "/mine.tmp-" + gone));  // not a name the trainer writes
  CHECK(checkpoint_step(run + "/checkpoints/last") == 30);

  // A killed process stays a zombie until its parent waits for it (a harness that kills a
  // trainer and resumes at once): its temporaries are a dead writer's all the same, and the
  // next save of that checkpoint removes them.
  const pid_t zombie = ::fork();
  if (zombie == 0) ::_exit(0);
  for (int i = 0; i < 200 && read("/proc/" + std::to_string(zombie) + "/stat").find(") Z") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  REQUIRE(::kill(zombie, 0) == 0);  // still in the process table
  CHECK_FALSE(process_alive(zombie));
  const std::string last = run + "/checkpoints/last", left = last + ".tmp-" + std::to_string(zombie);
  fs::create_directories(left);
  Seq2SeqTransformer model(load_checkpoint_config(last));
  load_model_weights(last, model);
  save_checkpoint(last, model, nullptr);
  CHECK_FALSE(exists(left));
  ::waitpid(zombie, nullptr, 0);
}

TEST_CASE("run safety: resuming a finished run says so and trains no further", "[reliability]") {
  TempDir tmp;
  const std::string run = tmp / "run";
  const std::vector<std::string> args = train_args(trained().data, run, 20);
  expect_exit(qk(args), 0, {"stopped at step 20"});
  const std::string before = read(run + "/checkpoints/last/trainer.safetensors") + read(run + "/metrics.jsonl");
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  for (int requeue = 0; requeue < 2; ++requeue) {
    expect_exit(qk(resume), 0, {run + " is finished: it stopped at step 20 because it reached the step budget"});
    CHECK(read(run + "/checkpoints/last/trainer.safetensors") + read(run + "/metrics.jsonl") == before);
  }
  // Patience: a run that stopped on it stays stopped (--patience 1: the second evaluation
  // without a better BLEU than the first ends it).
  const std::string patient = tmp / "patient";
  std::vector<std::string> p = {"train", "--data", trained().data, "--run", patient, "--preset", "tiny", "--vocab-size", "30",
                                "--max-steps", "2000", "--eval-every", "10", "--eval-sentences", "1", "--patience", "1",
                                "--threads", "1"};
  const Result first = qk(p);
  expect_exit(first, 0, {"because of patience"});
  const int64_t stopped = checkpoint_step(patient + "/checkpoints/last");
  p.push_back("--resume");
  expect_exit(qk(p), 0, {cat("is finished: it stopped at step ", stopped, " because of patience")});
  CHECK(checkpoint_step(patient + "/checkpoints/last") == stopped);
  // --stop-lr: past the warm-up, an evaluation with the rate below it ends the run, and a resume
  // says so (here at once: the flat rate 0.001 is below 0.002).
  const std::string cut = tmp / "cut";
  std::vector<std::string> c = {"train", "--data", trained().data, "--run", cut, "--preset", "tiny", "--vocab-size", "30",
                                "--max-steps", "2000", "--eval-every", "10", "--eval-sentences", "1", "--lr", "0.001",
                                "--warmup", "0", "--stop-lr", "0.002", "--threads", "1"};
  expect_exit(qk(c), 0, {"stopped at step 10", "because of --stop-lr (the learning rate, 0.001, is below 0.002)"});
  c.push_back("--resume");
  expect_exit(qk(c), 0, {"is finished: it stopped at step 10 because its learning rate (0.001) fell below --stop-lr 0.002"});
  // Raising the budget that stopped it trains on.
  resume = train_args(trained().data, run, 30);
  resume.push_back("--resume");
  expect_exit(qk(resume), 0, {"stopped at step 30"});
}

TEST_CASE("run safety: an option missing its value does not swallow the next option", "[reliability]") {
  TempDir tmp;
  Command c{{"train", "--data", trained().data, "--run", "--resume"}};
  c.cwd = tmp.path;
  expect_exit(run_command(c), 2, {"--run needs a value, but the next argument is the option '--resume'"});
  CHECK(fs::is_empty(tmp.path));  // no run called "--resume"
  c.args = {"translate", "--run", trained().run, "--output", "--greedy"};
  expect_exit(run_command(c), 2, {"--output needs a value, but the next argument is the option '--greedy'"});
  CHECK(fs::is_empty(tmp.path));
  c.args = {"bleu", "--ref=--odd-name"};  // a value that starts with -- is given with =
  expect_exit(run_command(c), 1, {"--odd-name"});
}

TEST_CASE("run safety: FIFOs, millions of empty lines, tiny corpora and long --text get clear, bounded answers",
          "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 20);
  fs::remove(data + "/train.es");
  REQUIRE(::mkfifo((data + "/train.es").c_str(), 0644) == 0);
  expect_exit(qk(train_args(data, run, 2)), 1, {data + "/train.es' is not a regular file (a FIFO)"});
  CHECK_FALSE(exists(run));
  fs::remove(data + "/train.es");

  // 5 million empty lines cost their bytes (5 MB a file), not a string each (the old reader: 320
  // MB more, 32 bytes a line and side).
  write_corpus(data, 400);
  const std::string empty(5'000'000, '\n');
  write(data + "/train.es", empty + read(data + "/train.es"));
  write(data + "/train.en", empty + read(data + "/train.en"));
  const auto [status, peak_kb] = run_measuring_memory(train_args(data, run, 1), tmp / "log");
  INFO(read(tmp / "log"));
  CHECK(status == 0);
  CHECK_THAT(read(tmp / "log"), Contains("dropped: 5000000 with an empty side"));
  CHECK(peak_kb > 0);
  CHECK(peak_kb < 250 * 1024);  // about 30 MB here, 180 MB in the sanitizer build

  // A corpus too small for any vocabulary: the advice can be followed.
  for (const char* split : {"train", "dev"}) {
    write(data + "/" + split + ".es", "a\na\n");
    write(data + "/" + split + ".en", "a\na\n");
  }
  expect_exit(qk(train_args(data, tmp / "small", 2)), 1,
              {"supports at most 6 subword pieces, fewer than qkgrad's minimum vocabulary of 8"});
  CHECK_FALSE(exists(tmp / "small"));

  std::string text;
  for (int i = 0; i < 3000; ++i) text += "uno dos ";
  expect_exit(qk({"attention", "--run", trained().run, "--text", text, "--out", tmp / "att"}), 1,
              {"attention: --text is ", "more than --max-length 128"});
  CHECK(entries_containing(tmp.path, "att").empty());
}
