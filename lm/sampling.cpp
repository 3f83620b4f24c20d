// Sampling bytes from a language model with its KV cache. See lm/sampling.h.
#include "lm/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/autograd.h"
#include "core/error.h"
#include "io/text.h"
#include "ops/ops.h"

namespace qkgrad::lm {

int64_t sample_byte(const std::vector<double>& logits, const SamplingOptions& o, Generator& gen) {
  const auto V = static_cast<int64_t>(logits.size());
  std::vector<int64_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  // Most likely first (ties: the lower byte), so that greedy and top-k are deterministic.
  std::stable_sort(ids.begin(), ids.end(), [&](int64_t a, int64_t b) { return logits[a] > logits[b]; });
  if (o.temperature <= 0) return ids.front();
  const int64_t k = o.top_k > 0 ? std::min(o.top_k, V) : V;
  // p_i ∝ exp((z_i − z_max) / T) over the k kept bytes: the softmax with its maximum subtracted
  // (a forbidden byte's −∞ gives weight 0).
  std::vector<double> weights(static_cast<std::size_t>(k));
  double total = 0;
  for (int64_t i = 0; i < k; ++i) total += weights[i] = std::exp((logits[ids[i]] - logits[ids[0]]) / o.temperature);
  double u = gen.next_uniform() * total;
  for (int64_t i = 0; i < k; ++i) {
    if ((u -= weights[i]) <= 0) return ids[i];
  }
  int64_t last = 0;  // rounding left u a hair above 0: the last byte that could be drawn
  for (int64_t i = 0; i < k; ++i) last = weights[i] > 0 ? i : last;
  return ids[last];
}

void forbid_invalid_utf8(std::string_view text, std::vector<double>& logits) {
  std::string next(utf8_incomplete_tail(text));  // the character begun, then a candidate byte
  next.push_back('\0');
  for (std::size_t b = 0; b < logits.size(); ++b) {
    next.back() = static_cast<char>(b);
    if (!is_utf8_char_prefix(next)) logits[b] = -std::numeric_limits<double>::infinity();
  }
}

namespace {

// Feeds `bytes` (at least one) to a fresh cache; returns the logits of the byte after them.
std::vector<double> read_into_cache(LanguageModel& model, LanguageModel::DecodeState& state, const std::string& bytes,
                                    int64_t capacity) {
  state = model.start_decoding(1, capacity);
  std::vector<int64_t> ids;
  for (const char c : bytes) ids.push_back(static_cast<unsigned char>(c));
  const auto n = static_cast<int64_t>(ids.size());
  const Tensor logits = model.decode_step(state, Tensor::from_ids(ids, {1, n}, model.device()));  // [1, n, 256]
  return slice(logits, 1, n - 1, n).to_vector();
}

}  // namespace

std::string generate(LanguageModel& model, const std::string& prompt, const SamplingOptions& o,
                     const std::function<void(std::string_view)>& emit) {
  QKGRAD_CHECK(o.context >= 2, "generate: the context must be >= 2 bytes, got ", o.context);
  QKGRAD_CHECK(o.temperature >= 0 && std::isfinite(o.temperature), "generate: the temperature must be >= 0, got ", o.temperature);
  const EvalMode eval_mode(model);
  NoGradGuard no_grad;
  Generator gen(o.seed, /*stream=*/3);
  std::string text = prompt.empty() ? std::string("\n") : prompt;  // everything the model has read
  const auto keep = [&] { return text.substr(text.size() - std::min<std::size_t>(text.size(), o.context / 2 + 1)); };
  if (static_cast<int64_t>(text.size()) > o.context) text = text.substr(text.size() - o.context);
  LanguageModel::DecodeState state;
  std::vector<double> logits = read_into_cache(model, state, text, o.context);
  int64_t cached = static_cast<int64_t>(text.size());
  std::string out;
  while (static_cast<int64_t>(out.size()) < o.max_bytes || !utf8_incomplete_tail(text).empty()) {
    forbid_invalid_utf8(text, logits);
    const char next = static_cast<char>(sample_byte(logits, o, gen));
    out += next;
    text += next;
    if (emit) emit(std::string_view(&out.back(), 1));
    const bool whole_characters = utf8_incomplete_tail(text).empty();
    if (whole_characters && !o.stop_at.empty() && out.ends_with(o.stop_at)) break;
    if (whole_characters && static_cast<int64_t>(out.size()) >= o.max_bytes) break;
    if (cached == o.context) {  // full: start again from the last half of the text
      text = keep();
      logits = read_into_cache(model, state, text, o.context);
      cached = static_cast<int64_t>(text.size());
      continue;
    }
    const Tensor step = model.decode_step(state, Tensor::from_ids({static_cast<unsigned char>(next)}, {1, 1}, model.device()));
    logits = step.to_vector();  // [1, 1, 256]
    ++cached;
  }
  return out;
}

}  // namespace qkgrad::lm
