#include "training/stop_signals.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace qkgrad::training {

namespace {

std::atomic<int> g_alive{0};     // StopSignals objects alive
std::atomic<int> g_received{0};  // the first stop signal since the newest StopSignals, or 0
std::mutex g_note_mutex;
std::string g_note;  // guarded by g_note_mutex
struct sigaction g_previous_pipe;

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  return set;
}

// Ends the process as `signal` would by default: the disposition back to SIG_DFL, the signal
// unblocked in this thread, and raised here (the status the parent sees is "killed by signal").
[[noreturn]] void end_with(int signal) {
  std::fflush(stderr);
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  ::sigaction(signal, &fallback, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  ::pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  ::raise(signal);
  std::_Exit(128 + signal);  // not reached: the default action of the three ends the process
}

void note_first_signal() {
  std::lock_guard<std::mutex> lock(g_note_mutex);
  if (g_note.empty()) return;
  const ssize_t written = ::write(STDERR_FILENO, g_note.data(), g_note.size());
  (void)written;
}

// The watcher thread: takes each stop signal in turn. The first while a StopSignals is alive
// sets the flag; any other ends the program.
void watch(sigset_t set) {
  for (;;) {
    int signal = 0;
    if (::sigwait(&set, &signal) != 0) continue;
    int none = 0;
    if (g_alive.load() > 0 && g_received.compare_exchange_strong(none, signal)) {
      note_first_signal();
      continue;
    }
    end_with(signal);
  }
}

}  // namespace

void StopSignals::route_to_watcher() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = stop_set();
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(watch, set).detach();
  });
}

StopSignals::StopSignals() {
  route_to_watcher();
  g_received = 0;
  ++g_alive;
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &g_previous_pipe);
}

StopSignals::~StopSignals() {
  set_note("");
  --g_alive;
  ::sigaction(SIGPIPE, &g_previous_pipe, nullptr);
}

int StopSignals::received() { return g_received.load(); }

void StopSignals::set_note(const std::string& note) {
  std::lock_guard<std::mutex> lock(g_note_mutex);
  g_note = note;
}

void StopSignals::throw_if_received(const std::string& doing, const std::string& consequence) {
  const int signal = g_received.load();
  if (signal != 0) throw Interrupted(signal, cat("interrupted by ", signal_name(signal), " while ", doing, "; ", consequence));
}

void StopSignals::unblock_in_child() {
  const sigset_t set = stop_set();
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT (Ctrl-C)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return cat("signal ", signal);
  }
}

}  // namespace qkgrad::training
