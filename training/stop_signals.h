// Stopping on a signal. SIGINT (Ctrl-C), SIGTERM (kill, timeout, systemd, docker stop, Slurm
// pre-emption) and SIGHUP (a dropped ssh session) only set a flag while a StopSignals is alive;
// the trainer polls it, saves a checkpoint and exits with status 128 + the signal. A second
// signal of any of the three, or one that arrives while no StopSignals is alive, ends the
// program at once as the signal's default action would.
//
// The signals are never delivered asynchronously to a thread that computes. main() calls
// StopSignals::route_to_watcher() before any thread starts: it blocks the three signals in the
// calling thread (every thread started later, OpenMP's and oneDNN's too, inherits the mask) and
// starts one thread that takes them with sigwait(). A signal handler would run on top of whatever
// the interrupted thread was doing; on some virtual machines (seen: an Intel Xeon guest, Linux
// 6.18) the AVX-512 state of a thread interrupted inside oneDNN's sgemm came back damaged, and
// the process died of heap corruption a few steps after a SIGTERM. A thread waiting in sigwait()
// has nothing in flight to damage.
#pragma once

#include <string>

#include "core/error.h"

namespace qkgrad::training {

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

// While alive: stop signals set the flag (and SIGPIPE is ignored, so that a closed stdout cannot
// kill a training run between two checkpoints); the destructor restores the defaults.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and starts the thread that waits for
  // them; call it first in main(), before anything starts a thread. Once per process (later
  // calls do nothing); the first StopSignals calls it too, for programs that did not (threads
  // started before then are not covered).
  static void route_to_watcher();
  // The first stop signal received since construction, or 0.
  static int received();
  // A line written to stderr when the first signal arrives, by the watcher thread (so that it is
  // seen even if the process is then killed while it waits; a data-parallel rank blocked in a
  // collective is). Empty: none.
  static void set_note(const std::string& note);
  // Throws Interrupted ("interrupted by SIGTERM while <doing>; <consequence>") after a signal.
  static void throw_if_received(const std::string& doing, const std::string& consequence);
  // In a child process after fork(): the three unblocked again (the mask is inherited).
  static void unblock_in_child();
};

// "SIGTERM", "SIGINT", "SIGHUP", or "signal N".
std::string signal_name(int signal);

}  // namespace qkgrad::training
