#include "training/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>

#include "core/error.h"

namespace qkgrad::training {

namespace {

// Whether the terminal rewraps its lines when it gets narrower (see the class comment).
bool terminal_rewraps() {
  const char* term = std::getenv("TERM");
  return std::getenv("XTERM_VERSION") == nullptr && std::getenv("STY") == nullptr &&
         !(term != nullptr && std::string(term) == "linux");
}

std::size_t terminal_columns() {
  winsize ws{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
  const char* env = std::getenv("COLUMNS");
  const long c = env ? std::strtol(env, nullptr, 10) : 0;
  return c >= 20 ? static_cast<std::size_t>(c) : 80;
}

std::string timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

}  // namespace

Progress::Progress(bool shown, bool live)
    : shown_(shown), terminal_(shown && live && ::isatty(STDOUT_FILENO) == 1), rewraps_(terminal_rewraps()) {}

void Progress::live(const std::string& left, double fraction, const std::string& right) {
  if (!terminal_) return;
  const std::size_t columns = terminal_columns();
  const std::size_t width = columns - 3;  // room for the echo of ^C
  const std::size_t text = left.size() + right.size() + 4;  // " [" ... "] "
  std::string line = left + " " + right;
  if (width >= text + 10) {
    const std::size_t bar = width - text;
    const auto filled = static_cast<std::size_t>(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(bar));
    line = left + " [" + std::string(filled, '#') + std::string(bar - filled, '.') + "] " + right;
  }
  if (line.size() > width) line.resize(width);
  std::printf("%s%s\x1b[K", erase_live_line(columns).c_str(), line.c_str());  // ESC [ K: erase the rest of the row
  std::fflush(stdout);
  live_chars_ = line.size();
}

void Progress::log(const std::string& line) { print_above(timestamp() + " " + line); }
void Progress::message(const std::string& text) { print_above(text); }

void Progress::print_above(const std::string& text) {
  if (!shown_) return;
  if (live_chars_ > 0) std::printf("%s\x1b[K", erase_live_line(terminal_columns()).c_str());
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  live_chars_ = 0;
}

// Back to the start of the live line: "\r", and after a shrink that rewrapped it over k rows,
// k - 1 rows up (ESC [ n A) with those rows cleared (ESC [ J: to the end of the screen).
std::string Progress::erase_live_line(std::size_t columns) const {
  const std::size_t rows = live_chars_ == 0 ? 1 : (live_chars_ - 1) / columns + 1;
  if (rows <= 1 || !rewraps_) return "\r";
  return cat("\r\x1b[", rows - 1, "A\x1b[J");
}

}  // namespace qkgrad::training
