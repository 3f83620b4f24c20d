// Running a program without a shell: its arguments as given, stdin from /dev/null, stdout and
// stderr captured, a time limit after which it is killed. prepare_bible (corpora/bible.h) runs
// diatheke with it; nothing here knows about diatheke or the Bible.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace qkgrad::corpora {

struct ProgramResult {
  int spawn_error = 0;   // errno of a failed start (ENOENT: no such program), 0 when it ran
  int exit_status = 0;   // exit code, or 128 + signal number
  std::string out, err;  // what it wrote to stdout and stderr
};

// The most a program may write to stdout and stderr together before it is stopped.
inline constexpr std::size_t kMaxProgramOutput = std::size_t{512} << 20;  // 512 MiB

// "`diatheke -b system -k 'Matthew-Revelation of John'`": a command line for messages (an
// argument with a space is quoted).
std::string describe_command(const std::vector<std::string>& argv);

// Runs argv[0] (searched on PATH when it has no '/') with argv[1...] as its arguments and
// collects what it writes. A program that cannot be started is not an exception: the result's
// spawn_error says why (the caller knows what to advise: which package to install). Throws
// qkgrad::Error, starting with who + ": " and naming the command line, when it
// runs longer than `timeout_seconds` (also when it has closed its outputs but not exited) or
// writes more than kMaxProgramOutput (it is then killed and reaped), when argv is empty, and
// when a pipe, poll or waitpid fails.
ProgramResult run_program(const std::vector<std::string>& argv, double timeout_seconds,
                          const std::string& who = "run_program");

}  // namespace qkgrad::corpora
