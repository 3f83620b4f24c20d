// The language-model library (lm/): a text's windows and batches, reading a corpus and its
// errors, the checkpoint config, perplexity and bits per byte, and sampling with the KV cache.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <set>

#include "core/autograd.h"
#include "core/error.h"
#include "io/text.h"
#include "lm/evaluation.h"
#include "lm/sampling.h"
#include "lm/settings.h"
#include "lm/text_data.h"
#include "lm/trained_model.h"
#include "ops/ops.h"
#include "temp_dir.h"

using namespace qkgrad;
using namespace qkgrad::lm;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

LanguageModelConfig tiny_config(AttentionMode mode = AttentionMode::scaled_dot) {
  LanguageModelConfig c;
  c.layers = 1;
  c.d_model = 16;
  c.heads = 2;
  c.ffn = 32;
  c.attention = mode;
  c.vocab = kVocab;
  c.qknorm_length = 16;
  c.seed = 7;
  return c;
}

}  // namespace

TEST_CASE("Windows: each byte after the first is a target once; the last window is shorter", "[lm]") {
  const std::string text = "abcdefghij";  // 10 bytes: 9 targets
  const Windows w(text, 4);
  CHECK(w.full() == 2);   // targets b..e, f..i
  CHECK(w.count() == 3);  // and j
  CHECK(w.targets(0) == 4);
  CHECK(w.targets(2) == 1);
  const Windows::Batch b = w.batch({0, 2}, Device::cpu);
  CHECK(b.inputs.shape() == Shape{2, 4});
  CHECK(b.inputs.to_ids() == std::vector<int64_t>{'a', 'b', 'c', 'd', 'i', 0, 0, 0});
  CHECK(b.targets.to_ids() == std::vector<int64_t>{'b', 'c', 'd', 'e', 'j', -1, -1, -1});
  CHECK(b.lengths == std::vector<int64_t>{4, 1});
  CHECK(b.target_count == 5);
  int64_t all = 0;
  for (int64_t i = 0; i < w.count(); ++i) all += w.targets(i);
  CHECK(all == 9);
  const std::string two = "ab";
  CHECK(Windows(two, 4).full() == 0);  // one target: no full window
  CHECK(Windows(two, 4).count() == 1);
  // Bytes above 127 are tokens 128..255, not negative numbers.
  const std::string utf8 = "\xc3\xa9!";
  CHECK(Windows(utf8, 2).batch({0}, Device::cpu).inputs.to_ids() == std::vector<int64_t>{0xc3, 0xa9});
}

TEST_CASE("WindowPlan: batches of exactly batch_size windows from across the text, each window once", "[lm]") {
  const WindowPlan plan(103, 10);  // 10 batches; 3 windows left out
  CHECK(plan.batches_per_epoch() == 10);
  CHECK(plan.batch_size() == 10);
  std::set<int64_t> seen;
  for (int64_t g = 0; g < plan.batches_per_epoch(); ++g) {
    const std::vector<int64_t> windows = plan.group(g);
    CHECK(windows.size() == 10);
    CHECK(windows.front() == g);
    CHECK(windows.back() == g + 90);  // one from each tenth of the text
    seen.insert(windows.begin(), windows.end());
  }
  CHECK(seen.size() == 100);
  CHECK(*seen.rbegin() == 99);
  const std::vector<int64_t> order = plan.epoch_order(5, 0);
  CHECK(std::set<int64_t>(order.begin(), order.end()).size() == 10);
  CHECK(order == plan.epoch_order(5, 0));
  CHECK(order != plan.epoch_order(5, 1));
  // Fewer windows than a batch: one batch of them all.
  const WindowPlan small(3, 10);
  CHECK(small.batches_per_epoch() == 1);
  CHECK(small.group(0) == std::vector<int64_t>{0, 1, 2});
  CHECK(spread_windows(10, 0).size() == 10);
  CHECK(spread_windows(10, 4) == std::vector<int64_t>{0, 2, 5, 7});
  CHECK(spread_windows(3, 10).size() == 3);
}

TEST_CASE("read_text_file: a missing, empty, binary or non-UTF-8 file is an error naming it and where", "[lm]") {
  TempDir dir;
  CHECK_THROWS_WITH(read_text_file(dir / "none.txt", "the training text"), Contains("none.txt"));
  write(dir / "empty.txt", "");
  CHECK_THROWS_WITH(read_text_file(dir / "empty.txt", "the training text"), Contains("empty.txt (the training text) is empty"));
  write(dir / "nul.txt", std::string("ab\ncd\0e", 7));
  CHECK_THROWS_WITH(read_text_file(dir / "nul.txt", "x"), Contains("NUL byte at line 2, column 3") && Contains("not a text file"));
  write(dir / "latin1.txt", "first line\ncaf\xe9 au lait\n");
  CHECK_THROWS_WITH(read_text_file(dir / "latin1.txt", "x"),
                    Contains("latin1.txt (x) is not UTF-8 at line 2, column 4 (byte 0xe9)") && Contains("iconv"));
  write(dir / "good.txt", "caf\xc3\xa9\n");
  CHECK(read_text_file(dir / "good.txt", "x") == "caf\xc3\xa9\n");
}

TEST_CASE("LM checkpoint config: every hyperparameter survives config.json; another kind is refused", "[lm]") {
  LanguageModelConfig c = tiny_config(AttentionMode::rms_qknorm);
  c.activation = "relu";
  c.tied_embeddings = "off";
  c.rope_base = 500;
  const LanguageModelConfig back = lm::config_from_json(lm::config_to_json(c), "config.json");
  CHECK(lm::config_to_json(back) == lm::config_to_json(c));
  Json j = lm::config_to_json(c);
  j["kind"] = "transformer";
  CHECK_THROWS_WITH(lm::config_from_json(j, "x/config.json"), Contains("x/config.json: not a language model's checkpoint"));
  j = lm::config_to_json(c);
  j["heads"] = 3;  // 16 is not divisible into 3 heads
  CHECK_THROWS_WITH(lm::config_from_json(j, "x/config.json"), Contains("x/config.json: ") && Contains("3 heads"));

  // Saved and loaded back into the same model; a model of another size is refused, naming the difference.
  TempDir dir;
  LanguageModel model(c);
  save_checkpoint(dir / "ckpt", model, nullptr);
  LanguageModelConfig other_seed = c;
  other_seed.seed = 99;
  LanguageModel copy(other_seed);
  load_weights(dir / "ckpt", copy);
  const auto a = model.named_parameters(), b = copy.named_parameters();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].second.to_vector() == b[i].second.to_vector());
  LanguageModelConfig wider = c;
  wider.ffn = 48;
  LanguageModel mismatch(wider);
  CHECK_THROWS_WITH(load_weights(dir / "ckpt", mismatch), Contains("does not fit this model: ffn 32 vs 48"));
}

TEST_CASE("score_text: the mean loss per byte over every window; perplexity and bits per byte from it", "[lm]") {
  LanguageModel model(tiny_config());
  const std::string text = "the cat sat on the mat, and the dog sat on the log.";
  const Windows w(text, 8);
  const TextScore s = score_text(model, w, spread_windows(w.count(), 0), 3);
  CHECK(s.bytes == static_cast<int64_t>(text.size()) - 1);
  // The same as one forward of the whole text (the windows see less context, so only its
  // first window agrees exactly; the totals agree in count, and the mean is near ln 256 at init).
  CHECK(s.loss() == Approx(std::log(256.0)).epsilon(0.1));
  CHECK(s.perplexity() == Approx(std::exp(s.loss())));
  CHECK(s.bits_per_byte() == Approx(s.loss() / std::numbers::ln2));
  // Batching does not change the score.
  const TextScore one_by_one = score_text(model, w, spread_windows(w.count(), 0), 1);
  CHECK(one_by_one.loss_sum == Approx(s.loss_sum).epsilon(1e-5));
  // Window 0 scored alone equals the cross-entropy of the model on its bytes.
  const Windows::Batch b = w.batch({0}, Device::cpu);
  NoGradGuard no_grad;
  model.eval();
  const double direct = cross_entropy(model.forward(b.inputs, b.lengths), b.targets).sum.item();
  CHECK(score_text(model, w, {0}, 1).loss_sum == Approx(direct).epsilon(1e-6));
}

TEST_CASE("sample_byte: greedy, top-k and temperature draw as the softmax says", "[lm]") {
  std::vector<double> logits(256, -5.0);
  logits['a'] = 2.0;
  logits['b'] = 1.0;
  logits['c'] = 0.5;
  Generator gen(3);
  SamplingOptions greedy;
  greedy.temperature = 0;
  CHECK(sample_byte(logits, greedy, gen) == 'a');
  SamplingOptions top2;
  top2.temperature = 1;
  top2.top_k = 2;
  std::map<int64_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) counts[sample_byte(logits, top2, gen)]++;
  CHECK(counts.size() == 2);  // only a and b
  const double p_a = std::exp(2.0) / (std::exp(2.0) + std::exp(1.0));
  CHECK(static_cast<double>(counts['a']) / n == Approx(p_a).margin(0.015));
  // A high temperature flattens the distribution: every one of the 256 bytes turns up.
  SamplingOptions hot;
  hot.temperature = 100;
  std::set<int64_t> seen;
  for (int i = 0; i < n; ++i) seen.insert(sample_byte(logits, hot, gen));
  CHECK(seen.size() == 256);
}

TEST_CASE("generate: the KV cache gives the bytes a full forward pass gives; the seed fixes the text", "[lm]") {
  LanguageModel model(tiny_config(AttentionMode::qknorm));
  model.eval();
  SamplingOptions o;
  o.temperature = 0;
  o.max_bytes = 12;
  o.context = 32;
  const std::string prompt = "Hello";
  const std::string cached = generate(model, prompt, o);
  // The reference: the whole text through forward() at every step, the most likely next byte.
  std::string text = prompt, expected;
  {
    NoGradGuard no_grad;
    for (int i = 0; i < o.max_bytes; ++i) {
      std::vector<int64_t> ids;
      for (const char c : text) ids.push_back(static_cast<unsigned char>(c));
      const auto n = static_cast<int64_t>(ids.size());
      std::vector<double> last = slice(model.forward(Tensor::from_ids(ids, {1, n}), {n}), 1, n - 1, n).to_vector();
      forbid_invalid_utf8(text, last);
      const char next = static_cast<char>(std::max_element(last.begin(), last.end()) - last.begin());
      expected += next;
      text += next;
    }
  }
  CHECK(cached == expected);
  // Past the context the cache is rebuilt from the last half: generation goes on.
  o.context = 8;
  o.max_bytes = 40;
  o.temperature = 1;
  std::string streamed;
  const std::string long_text = generate(model, prompt, o, [&](std::string_view b) { streamed += b; });
  CHECK(long_text.size() >= 40);  // and the rest of the last character
  CHECK(long_text.size() <= 43);
  CHECK(is_valid_utf8(long_text));
  CHECK(streamed == long_text);
  CHECK(generate(model, prompt, o) == long_text);  // the same seed: the same text
  o.seed = 2;
  CHECK(generate(model, prompt, o) != long_text);
  // --stop-at: the text ends at the first occurrence of the stop text (here the character that
  // starts at byte 5 or the first after it).
  o.seed = 1;
  std::size_t at = 5;
  while (utf8_char_length(long_text, at) == 0) ++at;
  o.stop_at = long_text.substr(at, utf8_char_length(long_text, at));
  const std::string stopped = generate(model, prompt, o);
  CHECK(stopped == long_text.substr(0, long_text.find(o.stop_at) + o.stop_at.size()));
  CHECK(stopped.size() <= at + o.stop_at.size());
}

TEST_CASE("generate: every byte drawn keeps the text well-formed UTF-8", "[lm]") {
  // What may follow: anything that starts a character after a whole one; inside a character,
  // only the continuation bytes its lead byte allows.
  auto allowed = [](const std::string& text) {
    std::vector<double> logits(256, 0.0);
    forbid_invalid_utf8(text, logits);
    std::string bytes;
    for (int b = 0; b < 256; ++b) bytes += std::isfinite(logits[b]) ? '1' : '0';
    return bytes;
  };
  const std::string after_whole = allowed("ab");
  CHECK(after_whole.substr(0, 0x80) == std::string(0x80, '1'));   // ASCII
  CHECK(after_whole.substr(0x80, 0x42) == std::string(0x42, '0'));  // continuation bytes, C0, C1
  CHECK(after_whole.substr(0xC2, 0x33) == std::string(0x33, '1'));  // C2..F4 start characters
  CHECK(after_whole.substr(0xF5) == std::string(11, '0'));
  CHECK(allowed("a\xC3") == std::string(0x80, '0') + std::string(0x40, '1') + std::string(0x40, '0'));
  CHECK(allowed("\xE0") == std::string(0xA0, '0') + std::string(0x20, '1') + std::string(0x40, '0'));  // no overlongs
  CHECK(allowed("\xED") == std::string(0x80, '0') + std::string(0x20, '1') + std::string(0x60, '0'));  // no surrogates
  CHECK(allowed("\xF4\x8F") == std::string(0x80, '0') + std::string(0x40, '1') + std::string(0x40, '0'));
  CHECK(allowed("\xE2\x80\x9D") == after_whole);  // ” is whole
  CHECK(allowed("") == after_whole);
  // An untrained model at a high temperature draws bytes nearly uniformly: without the rule about
  // half of them would break the text.
  LanguageModel model(tiny_config(AttentionMode::scaled_dot));
  SamplingOptions o;
  o.temperature = 5;
  o.max_bytes = 400;
  o.context = 32;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    o.seed = seed;
    const std::string text = generate(model, "caf\xC3\xA9 ", o);
    CHECK(is_valid_utf8(text));
    CHECK(text.size() >= 400);
  }
}

TEST_CASE("LM settings: presets, options.json round trip, resume rules, the model derived", "[lm]") {
  for (const std::string& name : kPresets) {
    const LmSettings s = preset_settings(name);
    CHECK_NOTHROW(model_config(s).validate());
    CHECK(to_json(from_json(to_json(s), "options.json", preset_settings("small"))) == to_json(s));
  }
  CHECK_THROWS_WITH(preset_settings("huge"), Contains("choose tiny, demo, small"));
  CHECK(fixed_on_resume("context"));
  CHECK(fixed_on_resume("attention"));
  CHECK_FALSE(fixed_on_resume("lr"));
  CHECK_FALSE(fixed_on_resume("weight_decay"));
  Json bad = Json::object();
  bad["z_loss"] = 2;
  CHECK_THROWS_WITH(from_json(bad, "run/options.json"), Contains("run/options.json: 'z_loss' must be"));
  const LanguageModelConfig c = model_config(preset_settings("demo"));
  CHECK(c.vocab == 256);
  CHECK(c.qknorm_length == 128);
  CHECK(c.layers == 4);
}

TEST_CASE("probe_attention: the largest attention logit and the mean entropy of each block", "[lm]") {
  LanguageModelConfig c = tiny_config();
  c.layers = 2;
  LanguageModel model(c);
  const int64_t T = 6;
  const Tensor ids = Tensor::from_ids({72, 101, 108, 108, 111, 33}, {1, T});
  const auto before = model.probe_attention(ids, {T});
  REQUIRE(before.size() == 2);
  CHECK(before[0].max_logit > 0);
  // Queries 10 times as long: every logit 10 times as large (scaled dot-product is linear in q).
  {
    NoGradGuard no_grad;
    Tensor w = model.blocks[0]->attn.q_proj.weight;
    w.copy_(w * 10.0);
  }
  CHECK(model.probe_attention(ids, {T})[0].max_logit == Approx(10 * before[0].max_logit).epsilon(1e-5));
  // Zero queries: every logit 0, so query i's row is uniform over its i + 1 keys: entropy ln(i + 1).
  {
    NoGradGuard no_grad;
    Tensor w = model.blocks[1]->attn.q_proj.weight;
    w.copy_(w * 0.0);
  }
  double expected = 0;
  for (int64_t i = 0; i < T; ++i) expected += std::log(static_cast<double>(i + 1)) / T;
  const auto zero = model.probe_attention(ids, {T});
  CHECK(zero[1].max_logit == 0);
  CHECK(zero[1].mean_entropy == Approx(expected).epsilon(1e-9));
  CHECK(model.training());  // the probe leaves the mode as it found it
  // QKNorm's logits are bounded by its gain g (|g q̂·k̂| <= g).
  LanguageModel qk(tiny_config(AttentionMode::qknorm));
  const double g = qk.blocks[0]->attn.g.item();
  const auto probe = qk.probe_attention(ids, {T});
  CHECK(probe[0].max_logit <= g + 1e-6);
  CHECK(probe[0].mean_entropy <= std::log(static_cast<double>(T)));
}
