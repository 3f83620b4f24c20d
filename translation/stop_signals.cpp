#include "translation/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <csignal>

namespace qkgrad::translation {

namespace {

constexpr int kStopSignals[] = {SIGINT, SIGTERM, SIGHUP};
volatile std::sig_atomic_t g_received = 0;
struct sigaction g_previous[3];
struct sigaction g_previous_pipe;
char g_note[1024];
volatile std::size_t g_note_length = 0;

// Notes the first signal; from then on any of the three ends the program (async-signal-safe:
// one store and sigaction).
void on_stop_signal(int signal) {
  if (g_received == 0) g_received = signal;
  if (g_note_length > 0) {
    const ssize_t written = ::write(STDERR_FILENO, g_note, g_note_length);  // async-signal-safe
    (void)written;
  }
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  for (int s : kStopSignals) ::sigaction(s, &fallback, nullptr);
}

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  // No SA_RESTART: a blocking call returns EINTR, so waits notice the signal at once.
  // The handler resets all three: a second signal, of any of them, ends the program.
  action.sa_flags = 0;
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &action, &g_previous[i]);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  ::sigaction(SIGPIPE, &ignore, &g_previous_pipe);
}

StopSignals::~StopSignals() {
  g_note_length = 0;
  for (int i = 0; i < 3; ++i) ::sigaction(kStopSignals[i], &g_previous[i], nullptr);
  ::sigaction(SIGPIPE, &g_previous_pipe, nullptr);
}

int StopSignals::received() { return g_received; }

void StopSignals::set_note(const std::string& note) {
  g_note_length = 0;
  const std::size_t n = std::min(note.size(), sizeof g_note);
  std::memcpy(g_note, note.data(), n);
  g_note_length = n;
}

void StopSignals::throw_if_received(const std::string& doing, const std::string& consequence) {
  const int signal = g_received;
  if (signal != 0) throw Interrupted(signal, cat("interrupted by ", signal_name(signal), " while ", doing, "; ", consequence));
}

std::string signal_name(int signal) {
  switch (signal) {
    case SIGINT: return "SIGINT (Ctrl-C)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return cat("signal ", signal);
  }
}

}  // namespace qkgrad::translation
