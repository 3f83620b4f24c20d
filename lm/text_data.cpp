// Reading a text corpus as bytes, its windows and the training batches. See lm/text_data.h.
#include "lm/text_data.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/generator.h"
#include "core/hash.h"
#include "io/atomic_file.h"
#include "io/text.h"

namespace qkgrad::lm {

namespace {

// "line 3, column 7" of the byte at `offset` (columns count bytes, from 1).
std::string line_and_column(const std::string& text, std::size_t offset) {
  const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(offset), '\n');
  const std::size_t start = offset == 0 ? std::string::npos : text.rfind('\n', offset - 1);
  const std::size_t column = start == std::string::npos ? offset + 1 : offset - start;
  return cat("line ", line, ", column ", column);
}

}  // namespace

std::string read_text_file(const std::string& path, const std::string& what) {
  constexpr std::size_t kMaxBytes = std::size_t{1} << 34;  // 16 GiB: far beyond a CPU's training run
  std::string text = read_file(path, kMaxBytes);
  QKGRAD_CHECK(!text.empty(), path, " (", what, ") is empty; a corpus is any UTF-8 text file with some text in it");
  const std::size_t nul = text.find('\0');
  QKGRAD_CHECK(nul == std::string::npos, path, " (", what, ") holds a NUL byte at ", line_and_column(text, nul),
               ": it is not a text file (a compressed or binary file?); give a UTF-8 text file");
  const std::size_t bad = first_invalid_utf8(text);
  QKGRAD_CHECK(bad == std::string::npos, path, " (", what, ") is not UTF-8 at ", line_and_column(text, bad),
               " (byte 0x", hex64(static_cast<unsigned char>(text[bad])).substr(14),
               "); convert it first, e.g. iconv -f LATIN1 -t UTF-8");
  return text;
}

std::string split_path(const std::string& data, const std::string& split) { return data + "/" + split; }

// ---- windows ----

Windows::Windows(const std::string& text, int64_t context) : text_(&text), context_(context) {
  QKGRAD_CHECK(context >= 1, "Windows: context must be >= 1, got ", context);
}

int64_t Windows::full() const { return (static_cast<int64_t>(text_->size()) - 1) / context_; }

int64_t Windows::count() const { return (static_cast<int64_t>(text_->size()) - 1 + context_ - 1) / context_; }

int64_t Windows::targets(int64_t window) const {
  return std::min(context_, static_cast<int64_t>(text_->size()) - 1 - window * context_);
}

Windows::Batch Windows::batch(const std::vector<int64_t>& windows, Device device) const {
  const auto B = static_cast<int64_t>(windows.size()), C = context_;
  std::vector<int64_t> inputs(static_cast<std::size_t>(B * C), 0), next(inputs.size(), -1);  // [B, C] each
  Batch b;
  for (int64_t r = 0; r < B; ++r) {
    const int64_t start = windows[r] * C, n = targets(windows[r]);
    for (int64_t t = 0; t < n; ++t) {
      inputs[r * C + t] = static_cast<unsigned char>((*text_)[start + t]);
      next[r * C + t] = static_cast<unsigned char>((*text_)[start + t + 1]);
    }
    b.lengths.push_back(n);
    b.target_count += n;
  }
  b.inputs = Tensor::from_ids(inputs, {B, C}, device);
  b.targets = Tensor::from_ids(next, {B, C}, device);
  return b;
}

// ---- the training batches ----

WindowPlan::WindowPlan(int64_t windows, int64_t batch_size)
    : per_batch_(std::min(windows, batch_size)), groups_(windows / std::max<int64_t>(per_batch_, 1)) {
  QKGRAD_CHECK(windows >= 1 && batch_size >= 1, "WindowPlan: no training windows (", windows, ") or batch size ", batch_size);
}

std::vector<int64_t> WindowPlan::group(int64_t g) const {
  std::vector<int64_t> windows;
  for (int64_t i = 0; i < per_batch_; ++i) windows.push_back(g + i * groups_);
  return windows;
}

std::vector<int64_t> WindowPlan::epoch_order(uint64_t seed, int64_t epoch) const {
  std::vector<int64_t> order(static_cast<std::size_t>(groups_));
  std::iota(order.begin(), order.end(), 0);
  Generator gen(seed, /*stream=*/1000 + static_cast<uint64_t>(epoch));
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[gen.next_below(i)]);  // Fisher–Yates
  return order;
}

std::vector<int64_t> spread_windows(int64_t total, int64_t count) {
  if (count <= 0 || count >= total) count = total;
  std::vector<int64_t> windows;
  for (int64_t i = 0; i < count; ++i) windows.push_back(i * total / count);
  return windows;
}

}  // namespace qkgrad::lm
