// A language model's data: a UTF-8 text file read as bytes (the model's tokens), cut into
// windows of `context` + 1 bytes, and the batches of training windows.
//
//   text   b0 b1 b2 ... b(n-1)
//   window w: bytes [w·C, w·C + C]: the input is its first C bytes, the targets its last C
//             (the next byte of each position), so consecutive windows share one byte and
//             every byte after the first is a target exactly once.
//
// Training uses the full windows; an evaluation uses all of them, the shorter last one too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qkgrad::lm {

// The whole file as bytes. Throws an Error naming the file (and the line and column of the
// first bad byte) when it is missing, empty, not UTF-8, or holds NUL bytes (a binary file);
// `what` says what the file is for ("the training text").
std::string read_text_file(const std::string& path, const std::string& what);

// DATA/NAME (NAME: train.txt, valid.txt, test.txt).
std::string split_path(const std::string& data, const std::string& split);

class Windows {
 public:
  Windows(const std::string& text, int64_t context);  // keeps a pointer to `text`
  Windows(std::string&&, int64_t) = delete;
  int64_t full() const;   // windows of C targets
  int64_t count() const;  // all windows, a shorter last one included
  int64_t targets(int64_t window) const;  // its number of targets (C, or fewer for the last)
  int64_t context() const { return context_; }
  const std::string& text() const { return *text_; }

  // A batch of windows: inputs [B, C] and targets [B, C] (i64; a shorter window is padded with
  // -1 targets, ignored by the loss) and each row's length.
  struct Batch {
    Tensor inputs, targets;
    std::vector<int64_t> lengths;
    int64_t target_count = 0;
  };
  Batch batch(const std::vector<int64_t>& windows, Device device) const;

 private:
  const std::string* text_;
  int64_t context_;
};

// The training batches: G = windows / batch_size batches, batch g holding the full windows g,
// g + G, ..., g + (batch_size − 1)·G (so every batch draws from the whole text; the last
// windows % batch_size windows are left out, and fewer windows than batch_size make one batch of
// them all); an epoch visits the G batches in an order shuffled by the seed and the epoch.
class WindowPlan {
 public:
  WindowPlan(int64_t windows, int64_t batch_size);
  int64_t batches_per_epoch() const { return groups_; }
  int64_t batch_size() const { return per_batch_; }
  std::vector<int64_t> group(int64_t g) const;
  std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch) const;

 private:
  int64_t per_batch_, groups_;
};

// Up to `count` windows spread evenly over `total` (all of them for count 0 or >= total): what
// an evaluation with --eval-windows reads.
std::vector<int64_t> spread_windows(int64_t total, int64_t count);

}  // namespace qkgrad::lm
