// Stopping on a signal. SIGINT (Ctrl-C), SIGTERM (kill, timeout, systemd, docker stop, Slurm
// pre-emption) and SIGHUP (a dropped ssh session) only set a flag while StopSignals is alive;
// the trainer polls it, saves a checkpoint and exits with status 128 + the signal. A second
// signal of the same kind ends the program at once (the handler is reset after the first).
#pragma once

#include <string>

#include "core/error.h"

namespace qkgrad::translation {

// Thrown where work stops on a signal before anything could be saved (e.g. while the subwords
// train): main() prints the message and exits with exit_status().
class Interrupted : public Error {
 public:
  Interrupted(int signal, const std::string& message) : Error(message), signal_(signal) {}
  int signal() const { return signal_; }
  int exit_status() const { return 128 + signal_; }

 private:
  int signal_;
};

// Installs the handlers (and ignores SIGPIPE, so that a closed stdout cannot kill a training
// run between two checkpoints); the destructor restores what was there before.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first stop signal received since construction, or 0.
  static int received();
  // A line written to stderr when the first signal arrives, from the handler itself (so that
  // it is seen even if the process is then killed while it waits; a data-parallel rank blocked
  // in a collective is). Empty: none. Truncated to 1 KiB.
  static void set_note(const std::string& note);
  // Throws Interrupted ("interrupted by SIGTERM while <doing>; <consequence>") after a signal.
  static void throw_if_received(const std::string& doing, const std::string& consequence);
};

// "SIGTERM", "SIGINT", "SIGHUP", or "signal N".
std::string signal_name(int signal);

}  // namespace qkgrad::translation
