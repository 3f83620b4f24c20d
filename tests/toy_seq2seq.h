// A generated sequence-to-sequence task for tests: copy or reverse short random sequences of
// symbols. Ids: 0 pad, 1 bos, 2 eos, 3 unk, symbols from 4.
#pragma once

#include <algorithm>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace qkgrad::toy {

struct Batch {
  Tensor src, tgt_in, tgt_out;  // [B, S], [B, T], [B, T] (i64, padded with 0)
  std::vector<int64_t> src_lengths, tgt_lengths;
  std::vector<std::vector<int64_t>> targets;  // the symbols to produce (no bos/eos)
};

inline Batch make_batch(Generator& gen, int64_t batch, int64_t symbols, int64_t min_len, int64_t max_len, bool reverse) {
  Batch b;
  std::vector<std::vector<int64_t>> sources;
  int64_t longest = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const int64_t n = min_len + static_cast<int64_t>(gen.next_below(static_cast<uint64_t>(max_len - min_len + 1)));
    std::vector<int64_t> s;
    for (int64_t j = 0; j < n; ++j) s.push_back(4 + static_cast<int64_t>(gen.next_below(static_cast<uint64_t>(symbols))));
    std::vector<int64_t> t = s;
    if (reverse) std::reverse(t.begin(), t.end());
    sources.push_back(s);
    b.targets.push_back(t);
    longest = std::max(longest, n);
  }
  const int64_t S = longest + 1, T = longest + 1;  // src + eos; bos + target / target + eos
  std::vector<int64_t> src(static_cast<std::size_t>(batch * S), 0), tin(static_cast<std::size_t>(batch * T), 0),
      tout(static_cast<std::size_t>(batch * T), 0);
  for (int64_t i = 0; i < batch; ++i) {
    const auto& s = sources[static_cast<std::size_t>(i)];
    const auto& t = b.targets[static_cast<std::size_t>(i)];
    const int64_t n = static_cast<int64_t>(s.size());
    for (int64_t j = 0; j < n; ++j) src[static_cast<std::size_t>(i * S + j)] = s[static_cast<std::size_t>(j)];
    src[static_cast<std::size_t>(i * S + n)] = 2;
    tin[static_cast<std::size_t>(i * T)] = 1;
    for (int64_t j = 0; j < n; ++j) {
      tin[static_cast<std::size_t>(i * T + j + 1)] = t[static_cast<std::size_t>(j)];
      tout[static_cast<std::size_t>(i * T + j)] = t[static_cast<std::size_t>(j)];
    }
    tout[static_cast<std::size_t>(i * T + n)] = 2;
    b.src_lengths.push_back(n + 1);
    b.tgt_lengths.push_back(n + 1);
  }
  b.src = Tensor::from_ids(src, {batch, S});
  b.tgt_in = Tensor::from_ids(tin, {batch, T});
  b.tgt_out = Tensor::from_ids(tout, {batch, T});
  return b;
}

}  // namespace qkgrad::toy
