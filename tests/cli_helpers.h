// Running qkgrad-translate from the tests (tests/test_cli.cpp, tests/test_reliability.cpp):
// through the shell (run), or directly with a time limit, a file size limit, another user or a
// given stdin (run_command), telling an exit status from death by a signal.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "temp_dir.h"

namespace qkgrad::test_cli {

namespace fs = std::filesystem;

inline const std::string kProgram = std::string(QKGRAD_BUILD_DIR) + "/examples/qkgrad-translate";

struct Result {
  int status = 0;           // the exit status; 128 + the signal for run(), which goes through sh
  std::string output;       // stdout and stderr
  bool signaled = false;    // run_command: the program died by a signal (a crash)
  int signal = 0;
  bool timed_out = false;   // run_command: it ran past its time limit (a hang)
};

// A shell command's output and exit status (it should say 2>&1 to catch stderr too).
inline Result run_shell(const std::string& command) {
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  Result r;
  std::array<char, 4096> buf{};
  for (std::size_t n; (n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0;) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// `qkgrad-translate ARGS 2>&1` through the shell (ARGS is shell text).
inline Result run(const std::string& args) { return run_shell(kProgram + " " + args + " 2>&1"); }

struct Command {
  explicit Command(std::vector<std::string> arguments) : args(std::move(arguments)) {}
  std::vector<std::string> args;  // after the program name
  std::string stdin_path;         // default /dev/null (nothing waits for a terminal)
  std::string stdout_path;        // default: stdout goes to Result::output with stderr
  long long file_size_limit = -1; // RLIMIT_FSIZE in bytes, or -1
  bool as_nobody = false;         // run as uid/gid 65534 (when root), so that chmod 000 bites
  int timeout_s = 60;             // a hang is killed after this long and reported as timed_out
  std::string cwd;                // the working directory (default: the test's)
};

inline bool running_as_root() { return ::geteuid() == 0; }

// A copy of qkgrad-translate that any user can run: the build directory may sit in a checkout
// only its owner can enter (root's home is mode 700), where `nobody` cannot reach kProgram.
// Made once per test process, in a world-readable directory of its own, removed at exit.
inline const std::string& program_for_any_user() {
  static const std::string path = [] {
    char pattern[] = "/tmp/qkgrad-program-XXXXXX";
    const char* dir = ::mkdtemp(pattern);
    if (dir == nullptr) throw std::runtime_error("mkdtemp failed");
    fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                             fs::perms::others_read | fs::perms::others_exec);
    const std::string copy = std::string(dir) + "/qkgrad-translate";
    fs::copy_file(kProgram, copy);
    fs::permissions(copy, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
    static const std::string remove_dir = dir;
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(remove_dir, ec);
    });
    return copy;
  }();
  return path;
}

// Runs qkgrad-translate under coreutils `timeout` (which passes on a death by signal as its own),
// with stdout and stderr together in Result::output.
inline Result run_command(const Command& c) {
  std::vector<std::string> argv;
  const bool other_user = c.as_nobody && running_as_root();
  if (other_user) argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
  const std::string program = other_user ? program_for_any_user() : kProgram;
  for (const std::string& a : {std::string("timeout"), std::string("-k"), std::string("5"), std::to_string(c.timeout_s), program}) {
    argv.push_back(a);
  }
  argv.insert(argv.end(), c.args.begin(), c.args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const std::string input = c.stdin_path.empty() ? "/dev/null" : c.stdin_path;
  const std::string output = c.stdout_path;

  int fds[2];
  if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error("fork failed");
  if (child == 0) {
    ::close(fds[0]);
    if (!c.cwd.empty() && ::chdir(c.cwd.c_str()) != 0) ::_exit(126);
    const int in = ::open(input.c_str(), O_RDONLY);
    if (in < 0) ::_exit(126);
    ::dup2(in, STDIN_FILENO);
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    if (!output.empty()) {
      const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out < 0) ::_exit(126);
      ::dup2(out, STDOUT_FILENO);
    }
    ::signal(SIGXFSZ, SIG_DFL);  // the program must cope with the limit itself
    if (c.file_size_limit >= 0) {
      struct rlimit limit {};
      limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(c.file_size_limit);
      if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(126);
    }
    ::execvp(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  Result r;
  std::array<char, 4096> buf{};
  for (ssize_t n; (n = ::read(fds[0], buf.data(), buf.size())) > 0;) r.output.append(buf.data(), static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.signal = WTERMSIG(status);
    r.status = 128 + r.signal;
  } else {
    r.status = WEXITSTATUS(status);
    r.timed_out = r.status == 124;
  }
  return r;
}

using testing::TempDir;

inline void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

inline std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// train/dev/test.{es,en}: `lines` pairs of two number words ("uno dos" / "one two").
inline void write_corpus(const std::string& dir, int lines) {
  const char* es[] = {"uno", "dos", "tres", "cuatro", "cinco"};
  const char* en[] = {"one", "two", "three", "four", "five"};
  for (const char* split : {"train", "dev", "test"}) {
    std::ofstream s(dir + "/" + split + ".es"), t(dir + "/" + split + ".en");
    for (int i = 0; i < lines; ++i) {
      s << es[i % 5] << " " << es[(i / 5) % 5] << "\n";
      t << en[i % 5] << " " << en[(i / 5) % 5] << "\n";
    }
  }
}

}  // namespace qkgrad::test_cli
