// Attention entropy / saturation statistics (translation/attention_stats.h): the row
// count, the ranges, and the two limits that can be computed by hand — g → 0 gives uniform rows
// over the visible keys (normalised entropy 1, max probability 1/visible), a huge g saturates.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/autograd.h"
#include "translation/attention_stats.h"

using namespace qkgrad;
using namespace qkgrad::translation;

namespace {

TransformerConfig small_config(AttentionMode mode) {
  TransformerConfig c;
  c.vocab = 40;
  c.d_model = 16;
  c.heads = 2;
  c.ffn = 32;
  c.encoder_layers = 2;
  c.decoder_layers = 1;
  c.attention = mode;
  c.qknorm_length = 8;
  c.seed = 5;
  return c;
}

std::vector<Pair> some_pairs() {
  std::vector<Pair> pairs;
  for (int64_t n = 1; n <= 6; ++n) {
    Pair p;
    for (int64_t j = 0; j < n; ++j) p.src.push_back(4 + (n * 7 + j * 3) % 30);
    for (int64_t j = 0; j < n + 1; ++j) p.tgt.push_back(4 + (n * 5 + j) % 30);
    pairs.push_back(p);
  }
  return pairs;
}

void set_all_gains(Seq2SeqTransformer& model, double value) {
  NoGradGuard no_grad;
  for (auto& [name, g] : model.attention_gains()) {
    Tensor t = g;
    t.fill_(value);
  }
}

}  // namespace

TEST_CASE("attention statistics: rows counted, values in range, modules in order", "[attention_stats]") {
  Seq2SeqTransformer model(small_config(AttentionMode::scaled_dot));
  const std::vector<Pair> pairs = some_pairs();
  const auto stats = attention_statistics(model, pairs, 64);
  REQUIRE(stats.size() == 4);  // 2 encoder self, decoder self + cross
  CHECK(stats[0].module == "encoder.layers.0.self_attn");
  CHECK(stats[2].module == "decoder.layers.0.self_attn");
  CHECK(stats[3].module == "decoder.layers.0.cross_attn");
  int64_t src_rows = 0, tgt_rows = 0;  // source + eos; bos + target
  for (const Pair& p : pairs) {
    src_rows += static_cast<int64_t>(p.src.size()) + 1;
    tgt_rows += static_cast<int64_t>(p.tgt.size()) + 1;
  }
  CHECK(stats[0].rows == 2 * src_rows);
  CHECK(stats[2].rows == 2 * tgt_rows);
  CHECK(stats[3].rows == 2 * tgt_rows);
  for (const auto& s : stats) {
    INFO(s.module);
    CHECK(s.mean_entropy >= 0);
    CHECK(s.mean_norm_entropy >= 0);
    CHECK(s.mean_norm_entropy <= 1 + 1e-9);
    CHECK(s.mean_max_prob > 0);
    CHECK(s.mean_max_prob <= 1 + 1e-9);
    CHECK(s.g == 0);  // scaled dot-product has no gain
  }
  CHECK(model.training());  // restored
}

TEST_CASE("attention statistics: g -> 0 is uniform, a huge g saturates", "[attention_stats]") {
  Seq2SeqTransformer model(small_config(AttentionMode::qknorm));
  model.eval();
  const std::vector<Pair> pairs = some_pairs();
  set_all_gains(model, 1e-9);
  const auto flat = attention_statistics(model, pairs, 64);
  // Decoder self-attention: query i (0-based) of a target of length T sees i + 1 keys, so the
  // mean max probability over rows is the mean of 1/(i + 1).
  double expected_max = 0;
  int64_t rows = 0;
  for (const Pair& p : pairs) {
    for (std::size_t i = 0; i <= p.tgt.size(); ++i, ++rows) expected_max += 1.0 / static_cast<double>(i + 1);
  }
  expected_max /= static_cast<double>(rows);
  CHECK(flat[2].mean_max_prob == Approx(expected_max).epsilon(1e-5));
  for (const auto& s : flat) {
    INFO(s.module);
    CHECK(s.mean_norm_entropy == Approx(1.0).epsilon(1e-5));
    CHECK(s.saturated_fraction <= 0.35);  // only rows with a single visible key
    CHECK(s.g == Approx(1e-9));
  }
  set_all_gains(model, 500.0);
  const auto sharp = attention_statistics(model, pairs, 64);
  for (std::size_t m = 0; m < sharp.size(); ++m) {
    INFO(sharp[m].module);
    CHECK(sharp[m].mean_entropy < flat[m].mean_entropy);
    CHECK(sharp[m].mean_max_prob > 0.8);
  }
}
