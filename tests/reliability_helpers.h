// What the reliability tests share (tests/test_reliability.cpp, tests/test_run_safety.cpp):
// running qkgrad-translate and checking how it ended, a small trained run to copy, background
// runs, and a private mount namespace for tmpfs and read-only mounts.
#pragma once

#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "cli_helpers.h"
#include "core/error.h"
#include "io/checkpoint.h"

namespace qkgrad::test_cli {

using Catch::Matchers::Contains;

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline Result qk(const std::vector<std::string>& args) { return run_command(Command{args}); }

// The program ended by itself (no signal, no time-out) with `status`, saying each fragment.
inline void expect_exit(const Result& r, int status, const std::vector<std::string>& fragments) {
  INFO("output:\n" << r.output);
  CHECK_FALSE(r.signaled);
  CHECK(r.signal == 0);
  CHECK_FALSE(r.timed_out);
  CHECK(r.status == status);
  for (const std::string& f : fragments) CHECK_THAT(r.output, Contains(f));
  // In the sanitizer build a report also exits with status 1: it must not hide behind an error.
  CHECK_FALSE(has(r.output, "Sanitizer"));
  CHECK_FALSE(has(r.output, "runtime error:"));
}

inline bool exists(const std::string& path) { return fs::exists(fs::symlink_status(path)); }

// Entries of `dir` whose names contain `part` (leftovers of interrupted writes).
inline std::vector<std::string> entries_containing(const std::string& dir, const std::string& part) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (has(e.path().filename().string(), part)) found.push_back(e.path().string());
  }
  return found;
}

inline std::vector<std::string> train_args(const std::string& data, const std::string& run, int64_t max_steps) {
  return {"train", "--data", data, "--run", run, "--preset", "tiny", "--vocab-size", "30", "--max-steps",
          std::to_string(max_steps), "--eval-every", "1000", "--eval-sentences", "1", "--threads", "1"};
}

// One small trained run (20 steps, checkpoints at 10 and 20), made once; tests copy it before
// changing anything.
struct TrainedRun {
  TempDir dir;
  std::string data = dir / "data", run = dir / "run";
  TrainedRun() {
    fs::create_directories(data);
    write_corpus(data, 400);
    const Result r = qk({"train", "--data", data, "--run", run, "--preset", "tiny", "--vocab-size", "30", "--max-steps",
                         "20", "--eval-every", "10", "--eval-sentences", "2", "--threads", "1"});
    if (r.status != 0) throw std::runtime_error("training the shared run failed:\n" + r.output);
  }
};
inline const TrainedRun& trained() {
  static const TrainedRun t;
  return t;
}
inline std::string copy_of_trained_run(const std::string& to) {
  fs::copy(trained().run, to, fs::copy_options::recursive);
  return to;
}

// A dead process id: a child that has exited and been waited for.
inline pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

// Starts qkgrad-translate ARGS in the background, its output (stdout and stderr) written to
// `log`, or discarded.
inline pid_t spawn(const std::vector<std::string>& args, const std::string& log = "/dev/null") {
  std::vector<std::string> argv = {kProgram};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    const int null_fd = ::open("/dev/null", O_RDONLY);
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  return child;
}

// The step of the checkpoint in DIR, or -1 while there is none (or a swap is in progress).
inline int64_t checkpoint_step(const std::string& dir) {
  try {
    return checkpoint_exists(dir) ? load_trainer_state(dir).get_int("step") : -1;
  } catch (const Error&) {
    return -1;
  }
}

// Moves this thread into a private mount namespace (once), so that a tmpfs mounted here is seen
// only by this process and the programs it starts, and vanishes with the process whatever
// happens. Returns "" or why it failed.
inline std::string private_mounts() {
  static const std::string result = [] {
    if (::unshare(CLONE_NEWNS) != 0) return cat("unshare(CLONE_NEWNS): ", std::strerror(errno));
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      return cat("making / private: ", std::strerror(errno));
    }
    return std::string();
  }();
  return result;
}

}  // namespace qkgrad::test_cli
