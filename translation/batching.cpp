#include "translation/batching.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "core/error.h"
#include "core/generator.h"
#include "nn/transformer.h"

namespace qkgrad::translation {

SpecialIds special_ids(const TransformerConfig& config) {
  return {config.pad_id, config.bos_id, config.eos_id, config.unk_id};
}

Batch make_batch(const std::vector<Pair>& pairs, const std::vector<int64_t>& indices, Device device,
                 SpecialIds ids) {
  QKGRAD_CHECK(!indices.empty(), "make_batch: no pairs");
  Batch b;
  b.indices = indices;
  int64_t S = 0, T = 0;
  for (int64_t i : indices) {
    const Pair& p = pairs.at(i);
    S = std::max<int64_t>(S, static_cast<int64_t>(p.src.size()) + 1);
    T = std::max<int64_t>(T, static_cast<int64_t>(p.tgt.size()) + 1);
  }
  const int64_t B = static_cast<int64_t>(indices.size());
  std::vector<int64_t> src(B * S, ids.pad), tin(B * T, ids.pad), tout(B * T, ids.pad);
  for (int64_t r = 0; r < B; ++r) {
    const Pair& p = pairs[indices[r]];
    const int64_t ns = static_cast<int64_t>(p.src.size()), nt = static_cast<int64_t>(p.tgt.size());
    std::copy(p.src.begin(), p.src.end(), src.begin() + r * S);
    src[r * S + ns] = ids.eos;
    tin[r * T] = ids.bos;
    std::copy(p.tgt.begin(), p.tgt.end(), tin.begin() + r * T + 1);
    std::copy(p.tgt.begin(), p.tgt.end(), tout.begin() + r * T);
    tout[r * T + nt] = ids.eos;
    b.src_lengths.push_back(ns + 1);
    b.tgt_lengths.push_back(nt + 1);
    b.src_tokens += ns + 1;
    b.tgt_tokens += nt + 1;
  }
  b.src = Tensor::from_ids(src, {B, S}, device);
  b.tgt_in = Tensor::from_ids(tin, {B, T}, device);
  b.tgt_out = Tensor::from_ids(tout, {B, T}, device);
  return b;
}

BatchSort batch_sort_named(const std::string& name) {
  if (name == "target") return BatchSort::target;
  if (name == "longer") return BatchSort::longer;
  fail(cat("batching: no batch sort '", name, "' (target or longer)"));
}

BatchPlan::BatchPlan(const std::vector<Pair>& pairs, int64_t max_tokens, BatchSort sort) {
  QKGRAD_CHECK(max_tokens >= 1, "batching: the token budget must be >= 1, got ", max_tokens);
  QKGRAD_CHECK(!pairs.empty(), "batching: no sentence pairs");
  // Sort by the order's key (BatchSort): similar lengths end up together; ties are broken by
  // position, so the plan is the same on every run.
  auto key = [&](int64_t i) -> std::array<int64_t, 4> {
    const auto s = static_cast<int64_t>(pairs[i].src.size()), t = static_cast<int64_t>(pairs[i].tgt.size());
    if (sort == BatchSort::target) return {t, s, 0, i};
    return {std::max(s, t) / 4, s, t, i};
  };
  std::vector<int64_t> order(pairs.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key(a) < key(b); });
  std::vector<int64_t> current;
  int64_t longest = 0;
  for (int64_t i : order) {
    const Pair& p = pairs[i];
    const int64_t len = static_cast<int64_t>(std::max(p.src.size(), p.tgt.size())) + 1;
    const int64_t padded = (static_cast<int64_t>(current.size()) + 1) * std::max(longest, len);
    if (!current.empty() && padded > max_tokens) {
      groups_.push_back(std::move(current));
      current.clear();
      longest = 0;
    }
    current.push_back(i);
    longest = std::max(longest, len);
  }
  if (!current.empty()) groups_.push_back(std::move(current));
}

std::vector<int64_t> BatchPlan::epoch_order(uint64_t seed, int64_t epoch) const {
  std::vector<int64_t> order(groups_.size());
  std::iota(order.begin(), order.end(), 0);
  Generator gen(seed, /*stream=*/1000 + static_cast<uint64_t>(epoch));
  for (std::size_t i = order.size(); i > 1; --i) {  // Fisher–Yates
    std::swap(order[i - 1], order[gen.next_below(i)]);
  }
  return order;
}

PaddingFill padding_fill(const BatchPlan& plan, const std::vector<Pair>& pairs) {
  PaddingFill f;
  for (int64_t b = 0; b < plan.batches_per_epoch(); ++b) {
    int64_t S = 0, T = 0;  // the batch's padded lengths, as make_batch sets them
    for (int64_t i : plan.group(b)) {
      const int64_t ns = static_cast<int64_t>(pairs.at(i).src.size()) + 1;  // + eos
      const int64_t nt = static_cast<int64_t>(pairs.at(i).tgt.size()) + 1;  // + bos (tgt_in) or eos (tgt_out)
      S = std::max(S, ns);
      T = std::max(T, nt);
      f.src_real += ns;
      f.tgt_real += nt;
    }
    const auto B = static_cast<int64_t>(plan.group(b).size());
    f.src_padded += B * S;
    f.tgt_padded += B * T;
  }
  return f;
}

double percentile(std::vector<int64_t> values, double q) {
  QKGRAD_CHECK(!values.empty(), "percentile: no values");
  QKGRAD_CHECK(q >= 0 && q <= 100, "percentile: q must be in [0, 100], got ", q);
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q / 100.0 * static_cast<double>(values.size()));
  const std::size_t index = static_cast<std::size_t>(std::max(1.0, rank)) - 1;
  return static_cast<double>(values[std::min(index, values.size() - 1)]);
}

}  // namespace qkgrad::translation
