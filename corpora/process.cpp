// Running a program without a shell (posix_spawnp), with a time limit. See process.h.
#include "corpora/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "core/error.h"

namespace qkgrad::corpora {

namespace {

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Reads what is available on `fd` into `into`; returns false at the end of the stream.
bool drain(int fd, std::string& into) {
  char buffer[65536];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n > 0) {
    into.append(buffer, static_cast<std::size_t>(n));
    return true;
  }
  return n < 0 && (errno == EINTR || errno == EAGAIN);
}

// Turns a wait status into an exit code (128 + the signal's number when it was killed).
int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Kills the child (it has run too long), reaps it and throws `why`.
[[noreturn]] void stop_and_fail(pid_t pid, const std::string& why) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  fail(why);
}

// Starts argv[0] (searched on PATH) with stdin from /dev/null and both outputs on pipes.
pid_t spawn(const std::vector<std::string>& argv, const std::string& who, Fd& out, Fd& err,
            int& spawn_error) {
  int out_pipe[2], err_pipe[2];
  QKGRAD_CHECK(::pipe2(out_pipe, O_CLOEXEC) == 0, who, ": cannot make a pipe to run ",
               describe_command(argv), ": ", std::strerror(errno));
  out.fd = out_pipe[0];
  Fd out_write{out_pipe[1]};
  QKGRAD_CHECK(::pipe2(err_pipe, O_CLOEXEC) == 0, who, ": cannot make a pipe to run ",
               describe_command(argv), ": ", std::strerror(errno));
  err.fd = err_pipe[0];
  Fd err_write{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // The program starts with no signal blocked and the stop signals and SIGPIPE at their
  // defaults, whatever this process has blocked (training/stop_signals.h) or ignored.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attributes, &none);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  spawn_error = ::posix_spawnp(&pid, args[0], &actions, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  return spawn_error == 0 ? pid : -1;
}

}  // namespace

std::string describe_command(const std::vector<std::string>& argv) {
  if (argv.empty()) return "``";
  std::string text = "`" + argv[0];
  for (std::size_t i = 1; i < argv.size(); ++i) {
    text += argv[i].find(' ') == std::string::npos ? " " + argv[i] : " '" + argv[i] + "'";
  }
  return text + "`";
}

ProgramResult run_program(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::string& who) {
  QKGRAD_CHECK(!argv.empty(), who, ": run_program needs a program to run (argv is empty)");
  ProgramResult result;
  Fd out, err;
  const pid_t pid = spawn(argv, who, out, err, result.spawn_error);
  if (pid < 0) return result;

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  const std::string too_long =
      cat(who, ": ", describe_command(argv), " ran longer than ", timeout_seconds,
          " s and was stopped; run it by hand to see why");
  while (out.fd >= 0 || err.fd >= 0) {  // read both pipes until the program closes them
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) stop_and_fail(pid, too_long);
    if (result.out.size() + result.err.size() > kMaxProgramOutput) {
      stop_and_fail(pid, cat(who, ": ", describe_command(argv), " wrote more than ",
                             kMaxProgramOutput >> 20, " MiB and was stopped"));
    }
    pollfd fds[2] = {{out.fd, POLLIN, 0}, {err.fd, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000))) < 0 &&
        errno != EINTR) {
      stop_and_fail(pid, cat(who, ": poll failed while reading the output of ",
                             describe_command(argv), ": ", std::strerror(errno)));
    }
    // A pipe is done when the program closed it (read returns 0) or reading it failed.
    const short ready = POLLIN | POLLHUP | POLLERR;
    if ((fds[0].revents & ready) != 0 && !drain(out.fd, result.out)) out.reset();
    if ((fds[1].revents & ready) != 0 && !drain(err.fd, result.err)) err.reset();
  }
  while (true) {  // wait for it to exit, still within the time limit
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      result.exit_status = exit_code(status);
      return result;
    }
    if (done < 0 && errno != EINTR) {
      fail(cat(who, ": waitpid failed for ", describe_command(argv), ": ", std::strerror(errno)));
    }
    if (Clock::now() >= deadline) stop_and_fail(pid, too_long);
    ::usleep(10000);
  }
}

}  // namespace qkgrad::corpora
