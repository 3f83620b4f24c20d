// The progress display of a training run: a live line on a terminal, log lines and messages.
#pragma once

#include <cstddef>
#include <string>

namespace qkgrad::training {

// The progress display. On a terminal: one live line, redrawn at every step (and while a dev
// evaluation runs), with a bar, step/total and %, the loss, tokens/s and the ETA, fitted to the
// terminal's width (read again at every redraw, so a resize is followed). The line leaves the
// last 3 columns free, so that the terminal's echo of Ctrl-C ("^C") does not wrap it onto a
// second row that the next redraw would not clear. After the terminal shrinks, most terminals
// (VTE, kitty, iTerm2, Windows Terminal, tmux, Alacritty) rewrap the old line over several rows:
// the redraw first goes up over those rows and clears them. xterm, GNU screen and the Linux
// console cut the line instead (going up would erase the line above), so there it does not.
// Log lines (every --log-every steps, timestamped) and messages scroll above it. Off a
// terminal there is no live line: only the log lines and the messages.
class Progress {
 public:
  // shown = false (the ranks other than 0 of a data-parallel job): prints nothing.
  // A data-parallel job has no live line either (mpirun may hand its ranks a terminal even when
  // its own output goes to a file): live = false.
  explicit Progress(bool shown = true, bool live = true);
  bool terminal() const { return terminal_; }

  // The live line: `left`, a bar `fraction` full, `right`; only the bar shrinks to fit.
  void live(const std::string& left, double fraction, const std::string& right);
  // A timestamped log line, and a message, each printed above the live line.
  void log(const std::string& line);
  void message(const std::string& text);

 private:
  void print_above(const std::string& text);
  std::string erase_live_line(std::size_t columns) const;

  bool shown_;
  bool terminal_;
  bool rewraps_;
  std::size_t live_chars_ = 0;  // the live line's length as drawn (0: none shown)
};

}  // namespace qkgrad::training
