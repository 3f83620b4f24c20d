// The translation pipeline's own parts: corpus reading and its errors, batching, percentiles,
// subwords, beam search, the argument parser, and a tiny end-to-end train / resume / translate.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "cli/args.h"
#include "core/autograd.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/text.h"
#include "nn/decode.h"
#include "nn/optim.h"
#include "toy_seq2seq.h"
#include "translation/batching.h"
#include "translation/beam_search.h"
#include "translation/scoring.h"
#include "ops/ops.h"
#include "translation/corpus.h"
#include "translation/trained_model.h"
#include "translation/subwords.h"
#include "translation/trainer.h"
#include "temp_dir.h"

using namespace qkgrad;
using namespace qkgrad::translation;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

using testing::TempDir;

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A tiny "language pair": numbers written as words, source in Spanish, target in English.
void write_number_corpus(const std::string& dir, int n, uint64_t seed) {
  const char* es[] = {"cero", "uno", "dos", "tres", "cuatro", "cinco", "seis", "siete", "ocho", "nueve"};
  const char* en[] = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"};
  Generator gen(seed);
  for (const char* split : {"train", "dev", "test"}) {
    std::string s, t;
    const int count = std::string(split) == "train" ? n : 40;
    for (int i = 0; i < count; ++i) {
      const int len = 1 + static_cast<int>(gen.next_below(4));
      for (int j = 0; j < len; ++j) {
        const int d = static_cast<int>(gen.next_below(10));
        s += std::string(j ? " " : "") + es[d];
        t += std::string(j ? " " : "") + en[d];
      }
      s += "\n";
      t += "\n";
    }
    write(dir + "/" + split + ".es", s);
    write(dir + "/" + split + ".en", t);
  }
}

}  // namespace

TEST_CASE("corpus reading: CRLF, tabs, whitespace-only lines, over-long lines", "[translate]") {
  TempDir tmp;
  write(tmp / "a.es", "hola\r\n\tuno  dos\t\n   \nlargo largo largo\n");
  write(tmp / "a.en", "hello\r\none two\nthree\nlong\n");
  const ParallelCorpus c = read_parallel(tmp / "a.es", tmp / "a.en", 10);
  CHECK(c.src == std::vector<std::string>{"hola", "uno dos"});
  CHECK(c.tgt == std::vector<std::string>{"hello", "one two"});
  CHECK(c.dropped_empty == 1);
  CHECK(c.dropped_long == 1);
}

TEST_CASE("corpus reading: Unicode whitespace is one space, zero-width characters stay", "[translate]") {
  // normalize_spaces (io/text.h) is the project's one whitespace normaliser (the Bible cleaner's too).
  CHECK(normalize_spaces("a\u00a0\u00a0b") == "a b");                        // no-break spaces
  CHECK(normalize_spaces("\u3000uno\u3000\u3000dos\u3000") == "uno dos");     // ideographic space
  CHECK(normalize_spaces("one\u2029two\u2028three\xc2\x85" "four") == "one two three four");
  CHECK(normalize_spaces("a\u2002\u2009\u200a\u202f\u205f\u1680b") == "a b");
  CHECK(normalize_spaces("\v\f a\x1f\x7f" "b \r\n") == "a b");                 // C0 controls, DEL
  CHECK(normalize_spaces(" \u00a0\t\u3000 ").empty());
  // Zero-width characters are not whitespace: they stay where they are.
  CHECK(normalize_spaces("a\u200bb \u200c \u2060c\ufeff") == "a\u200bb \u200c \u2060c\ufeff");
  // Bytes that are not UTF-8 are copied, one at a time: a bad lead byte never takes a space along.
  CHECK(normalize_spaces("bad \xff\xc3  byte\xe2\x80") == "bad \xff\xc3 byte\xe2\x80");
  CHECK(normalize_spaces("\xc2 \xa0") == "\xc2 \xa0");

  TempDir tmp;
  write(tmp / "u.es", "hola\u00a0\u00a0mundo\u3000\n\u2029\u00a0\npala\u200bbra\u2060s\n");
  write(tmp / "u.en", "hello\u2009world\nthree\nwo\u200brd\u2060s\r\n");
  const ParallelCorpus c = read_parallel(tmp / "u.es", tmp / "u.en");
  CHECK(c.src == std::vector<std::string>{"hola mundo", "pala\u200bbra\u2060s"});
  CHECK(c.tgt == std::vector<std::string>{"hello world", "wo\u200brd\u2060s"});
  CHECK(c.dropped_empty == 1);  // a line of Unicode spaces only is an empty line
  // Invalid UTF-8 is still an error of the reader, before any normalising.
  write(tmp / "bad.txt", "ok\u00a0ok\nbad\u00a0\xc2\n");
  CHECK_THROWS_WITH(read_text_lines(tmp / "bad.txt"), Contains("bad.txt:2: invalid UTF-8 at byte 6"));
}

TEST_CASE("corpus errors name the files, lines and counts", "[translate][errors]") {
  TempDir tmp;
  write(tmp / "a.es", "uno\ndos\n");
  write(tmp / "a.en", "one\n");
  CHECK_THROWS_WITH(read_parallel(tmp / "a.es", tmp / "a.en"),
                    Contains("a.es has 2 lines but") && Contains("a.en has 1"));
  write(tmp / "bad.txt", "ok\nbad \xff byte\n");
  CHECK_THROWS_WITH(read_text_lines(tmp / "bad.txt"), Contains("bad.txt:2: invalid UTF-8 at byte 5"));
  write(tmp / "nul.txt", std::string("a\0b\n", 4));
  CHECK_THROWS_WITH(read_text_lines(tmp / "nul.txt"), Contains("nul.txt:1: contains a NUL byte"));
  write(tmp / "e.es", "\n  \n");
  write(tmp / "e.en", "\n\n");
  CHECK_THROWS_WITH(read_parallel(tmp / "e.es", tmp / "e.en"), Contains("empty corpus"));
  CHECK_THROWS_WITH(read_text_lines(tmp / "missing.txt"), Contains("missing.txt"));
  CHECK(is_valid_utf8("ñandú ▁ 😀"));
  CHECK_FALSE(is_valid_utf8("\xc0\xaf"));      // overlong
  CHECK_FALSE(is_valid_utf8("\xed\xa0\x80"));  // surrogate
}

TEST_CASE("batches respect the token budget, cover every pair once, and shuffle per epoch from the seed", "[translate]") {
  std::vector<Pair> pairs;
  Generator gen(3);
  for (int i = 0; i < 200; ++i) {
    Pair p;
    for (uint64_t j = 0; j < 1 + gen.next_below(30); ++j) p.src.push_back(4);
    for (uint64_t j = 0; j < 1 + gen.next_below(30); ++j) p.tgt.push_back(5);
    pairs.push_back(p);
  }
  for (BatchSort sort : {BatchSort::target, BatchSort::longer}) {
    const BatchPlan plan(pairs, 200, sort);
    std::vector<int> seen(200, 0);
    for (int64_t b = 0; b < plan.batches_per_epoch(); ++b) {
      const Batch batch = make_batch(pairs, plan.group(b));
      CHECK(batch.src.numel() <= 200);
      CHECK(batch.tgt_in.numel() <= 200);
      for (int64_t i : batch.indices) ++seen[static_cast<std::size_t>(i)];
    }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));
  }
  const BatchPlan plan(pairs, 200);
  // Sorted by target, these independent lengths leave the sources ragged; by the longer side,
  // both sides pad less.
  const PaddingFill by_target = padding_fill(plan, pairs);
  const PaddingFill by_longer = padding_fill(BatchPlan(pairs, 200, BatchSort::longer), pairs);
  CHECK(by_longer.src_padded < by_target.src_padded);
  CHECK(by_longer.src_padded + by_longer.tgt_padded < by_target.src_padded + by_target.tgt_padded);
  CHECK(batch_sort_named("longer") == BatchSort::longer);
  CHECK_THROWS_WITH(batch_sort_named("source"), Contains("no batch sort 'source'"));
  CHECK(plan.epoch_order(1, 0) == plan.epoch_order(1, 0));
  CHECK(plan.epoch_order(1, 0) != plan.epoch_order(1, 1));
  CHECK(plan.epoch_order(1, 0) != plan.epoch_order(2, 0));
  // A budget of 8 makes two batches: the targets of 1 and 2 subwords together, the one of 3 alone.
  // With the eos, the first batch's sources (3 and 1 subwords) pad to 4 a row.
  const std::vector<Pair> three{{{4, 4, 4}, {5}}, {{4}, {5, 5, 5}}, {{4}, {5, 5}}};
  const BatchPlan small(three, 8);
  REQUIRE(small.batches_per_epoch() == 2);
  const PaddingFill fill = padding_fill(small, three);
  CHECK(fill.src_real == 4 + 2 + 2);
  CHECK(fill.src_padded == 2 * 4 + 1 * 2);
  CHECK(fill.tgt_real == 2 + 4 + 3);
  CHECK(fill.tgt_padded == 2 * 3 + 1 * 4);
  // Four pairs of (source, target) lengths (7, 1), (1, 2), (7, 2), (1, 1), with a budget of 16:
  // by target, the long sources fall into both batches; by the longer side, into one.
  const std::vector<Pair> four{{{4, 4, 4, 4, 4, 4, 4}, {5}}, {{4}, {5, 5}}, {{4, 4, 4, 4, 4, 4, 4}, {5, 5}}, {{4}, {5}}};
  const BatchPlan target_sorted(four, 16), longer_sorted(four, 16, BatchSort::longer);
  REQUIRE(target_sorted.batches_per_epoch() == 2);
  CHECK(target_sorted.group(0) == std::vector<int64_t>{3, 0});
  CHECK(target_sorted.group(1) == std::vector<int64_t>{1, 2});
  REQUIRE(longer_sorted.batches_per_epoch() == 2);
  CHECK(longer_sorted.group(0) == std::vector<int64_t>{3, 1});
  CHECK(longer_sorted.group(1) == std::vector<int64_t>{0, 2});
  const PaddingFill t = padding_fill(target_sorted, four), l = padding_fill(longer_sorted, four);
  CHECK(t.src_real == 20);
  CHECK(t.src_padded == 2 * 8 + 2 * 8);
  CHECK(l.src_padded == 2 * 2 + 2 * 8);
  CHECK(t.tgt_padded == 2 * 2 + 2 * 3);
  CHECK(l.tgt_padded == 2 * 3 + 2 * 3);
  const Batch b = make_batch({{{7, 8}, {9}}, {{7}, {9, 9, 9}}}, {0, 1});
  CHECK(b.src.to_ids() == std::vector<int64_t>{7, 8, 2, 7, 2, 0});
  CHECK(b.tgt_in.to_ids() == std::vector<int64_t>{1, 9, 0, 0, 1, 9, 9, 9});
  CHECK(b.tgt_out.to_ids() == std::vector<int64_t>{9, 2, 0, 0, 9, 9, 9, 2});
  CHECK(b.tgt_lengths == std::vector<int64_t>{2, 4});
  // A model built with other special ids gets batches in its own ids.
  TransformerConfig other;
  other.pad_id = 5;
  other.bos_id = 4;
  other.eos_id = 3;
  const Batch o = make_batch({{{7, 8}, {9}}, {{7}, {9, 9, 9}}}, {0, 1}, Device::cpu, special_ids(other));
  CHECK(o.src.to_ids() == std::vector<int64_t>{7, 8, 3, 7, 3, 5});
  CHECK(o.tgt_in.to_ids() == std::vector<int64_t>{4, 9, 5, 5, 4, 9, 9, 9});
  CHECK(o.tgt_out.to_ids() == std::vector<int64_t>{9, 3, 5, 5, 9, 9, 9, 3});
  CHECK(percentile({5, 1, 3, 2, 4}, 50) == 3);
  CHECK(percentile({5, 1, 3, 2, 4}, 97.5) == 5);
}

TEST_CASE("subwords: train, encode, decode; a vocabulary the corpus cannot support is a clear error", "[translate]") {
  TempDir tmp;
  write_number_corpus(tmp.path, 300, 1);
  Subwords::train({{tmp / "train.es", tmp / "train.en"}, tmp / "sw.model", 40, 1});
  const Subwords sw(tmp / "sw.model");
  CHECK(sw.vocab_size() == 40);
  const auto ids = sw.encode("dos tres");
  CHECK(!ids.empty());
  CHECK(sw.decode(ids) == "dos tres");
  CHECK_THROWS_WITH(Subwords::train({{tmp / "train.es"}, tmp / "big.model", 5000, 1}),
                    Contains("SentencePiece training failed") && Contains("lower --vocab-size"));
  CHECK_FALSE(fs::exists(tmp / "big.model"));
}

TEST_CASE("subwords: --subword-model bpe trains byte-pair merges, scored by their rank", "[translate]") {
  TempDir tmp;
  write_number_corpus(tmp.path, 300, 1);
  // The .vocab file's second column: SentencePiece's BPE scores the learned pieces by their
  // merge order (0, -1, -2, ...); the unigram model by their log-probabilities.
  auto learned_scores = [](const std::string& vocab_file) {
    std::vector<double> scores;
    std::istringstream lines(read(vocab_file));
    for (std::string line; std::getline(lines, line);) {
      const std::string piece = line.substr(0, line.find('\t'));
      if (piece == "<pad>" || piece == "<s>" || piece == "</s>" || piece == "<unk>") continue;
      scores.push_back(std::stod(line.substr(line.find('\t') + 1)));
    }
    return scores;
  };
  Subwords::train({{tmp / "train.es", tmp / "train.en"}, tmp / "bpe.model", 40, 1, "bpe"});
  Subwords::train({{tmp / "train.es", tmp / "train.en"}, tmp / "unigram.model", 40, 1, "unigram"});
  const Subwords bpe(tmp / "bpe.model"), unigram(tmp / "unigram.model");
  CHECK(bpe.vocab_size() == 40);
  CHECK(bpe.decode(bpe.encode("dos tres cuatro")) == "dos tres cuatro");
  CHECK(bpe.fingerprint() != unigram.fingerprint());
  const std::vector<double> b = learned_scores(tmp / "bpe.vocab"), u = learned_scores(tmp / "unigram.vocab");
  REQUIRE(b.size() >= 10);
  for (std::size_t i = 0; i < 10; ++i) CHECK(b[i] == -static_cast<double>(i));
  REQUIRE(!u.empty());
  CHECK(std::any_of(u.begin(), u.end(), [](double s) { return s != std::floor(s); }));
}

TEST_CASE("subwords: two trainings of the same vocabulary have one fingerprint; another vocabulary has another",
          "[translate]") {
  TempDir tmp;
  fs::create_directories(tmp / "a");
  fs::create_directories(tmp / "b/elsewhere");
  write_number_corpus(tmp / "a", 300, 1);
  write_number_corpus(tmp / "b/elsewhere", 300, 1);
  // The same text under other paths: SentencePiece writes the input paths and its own temporary
  // model prefix into the file, so the files differ byte for byte...
  Subwords::train({{tmp / "a/train.es", tmp / "a/train.en"}, tmp / "a/sw.model", 40, 1});
  Subwords::train({{tmp / "b/elsewhere/train.es", tmp / "b/elsewhere/train.en"}, tmp / "b/sw.model", 40, 1});
  const Subwords a(tmp / "a/sw.model"), b(tmp / "b/sw.model");
  CHECK(read(tmp / "a/sw.model") != read(tmp / "b/sw.model"));
  CHECK(a.file_fingerprint() != b.file_fingerprint());
  // ...but the pieces, scores and normaliser are the same: one vocabulary, one fingerprint.
  CHECK(a.fingerprint() == b.fingerprint());
  CHECK(a.fingerprint().rfind("spm-fnv1a64:", 0) == 0);
  CHECK(a.identifies(b.fingerprint()));
  CHECK(a.identifies(a.file_fingerprint()));  // what checkpoints before 2026-12-04 recorded
  CHECK_FALSE(a.identifies(b.file_fingerprint()));
  // Another size, or another corpus: another vocabulary.
  Subwords::train({{tmp / "a/train.es", tmp / "a/train.en"}, tmp / "a/sw39.model", 39, 1});
  CHECK(Subwords(tmp / "a/sw39.model").fingerprint() != a.fingerprint());
  write_number_corpus(tmp / "b", 100, 2);  // the same words, other frequencies: other scores
  Subwords::train({{tmp / "b/train.es", tmp / "b/train.en"}, tmp / "b/sw2.model", 40, 1});
  CHECK(Subwords(tmp / "b/sw2.model").fingerprint() != a.fingerprint());
  // A file that is not a SentencePiece model is refused by name.
  write(tmp / "bad.model", "not a model");
  CHECK_THROWS_WITH(Subwords(tmp / "bad.model"), Contains("bad.model"));
}

namespace {

// A one-layer model over the toy task's 14 ids, for the decoding tests.
TransformerConfig tiny_config(uint64_t seed) {
  TransformerConfig c;
  c.vocab = 14;
  c.d_model = 16;
  c.heads = 2;
  c.ffn = 32;
  c.encoder_layers = c.decoder_layers = 1;
  c.qknorm_length = 8;
  c.seed = seed;
  return c;
}

// Each row's source ids without its eos.
std::vector<std::vector<int64_t>> sources_of(const toy::Batch& b) {
  std::vector<std::vector<int64_t>> sources;
  const std::vector<int64_t> ids = b.src.to_ids();
  for (std::size_t i = 0; i < b.targets.size(); ++i) {
    const auto row = ids.begin() + static_cast<std::ptrdiff_t>(i) * b.src.size(1);
    sources.push_back(std::vector<int64_t>(row, row + b.src_lengths[i] - 1));
  }
  return sources;
}

// The sources of a toy batch of `rows` pairs drawn from Generator(seed).
std::vector<std::vector<int64_t>> toy_sources(uint64_t seed, int64_t rows) {
  Generator g(seed);
  return sources_of(toy::make_batch(g, rows, 10, 2, 6, false));
}

}  // namespace

TEST_CASE("beam search with beam 1 equals greedy decoding; wider beams score at least as well", "[translate]") {
  const TransformerConfig c = tiny_config(4);
  Seq2SeqTransformer model(c);
  model.eval();
  Generator g(2);
  const toy::Batch b = toy::make_batch(g, 5, 10, 2, 6, false);
  const std::vector<std::vector<int64_t>> sources = sources_of(b);
  // An untrained model rarely ends a sentence: both stop at their length limits, greedy at 30
  // tokens, beam search at |source| + 8; compare up to the beam's limit.
  const auto greedy = greedy_decode(model, b.src, b.src_lengths, 30);
  const auto beam1 = beam_search(model, sources, BeamOptions{1, 0.0, 8, {}});
  for (std::size_t i = 0; i < sources.size(); ++i) {
    const std::size_t limit = sources[i].size() + 8;
    const std::vector<int64_t> g(greedy[i].begin(), greedy[i].begin() + static_cast<std::ptrdiff_t>(std::min(limit, greedy[i].size())));
    CHECK(beam1[i] == g);
  }
  const auto beam4 = translate_all(model, sources, BeamOptions{4, 0.6, 8, {}}, 12);
  CHECK(beam4.size() == sources.size());
}

TEST_CASE("a sentence's beam search does not depend on its batch-mates (finished sentences leave the batch)",
          "[translate]") {
  Seq2SeqTransformer model(tiny_config(5));
  model.eval();
  // Sources of several lengths, so that their searches end at different steps (an untrained model
  // runs to its limit, |x| + max_extra): the batch shrinks as they end.
  const std::vector<std::vector<int64_t>> sources = toy_sources(12, 6);
  for (const BeamStop stop : {BeamStop::first_k, BeamStop::bound}) {
    BeamOptions o{3, 0.6, 4, {}};
    o.stop = stop;
    const auto batch = beam_search_nbest(model, sources, o);
    for (std::size_t i = 0; i < sources.size(); ++i) {
      const auto alone = beam_search_nbest(model, {sources[i]}, o).front();
      REQUIRE(alone.size() == batch[i].size());
      for (std::size_t k = 0; k < alone.size(); ++k) {
        CHECK(alone[k].tokens == batch[i][k].tokens);
        CHECK(alone[k].log_prob == Approx(batch[i][k].log_prob).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("beam search's stop rules: bound searches on while a live beam can still win, so its best never scores "
          "below first-k's", "[translate]") {
  // A task with two right answers: the source copied once or twice, half the time each. The
  // model learns p(eos) ≈ 1/2 after the first copy; with a length penalty the second copy then
  // scores better (the same log-probability, divided by a larger lp), but its ending comes later:
  // first-k has stopped by then, once beam-size worse endings have come in.
  const TransformerConfig c = tiny_config(6);
  Seq2SeqTransformer model(c);
  Generator data(11, 1);
  std::vector<Pair> pairs;
  for (int i = 0; i < 512; ++i) {
    Pair p;
    const int64_t n = 2 + static_cast<int64_t>(data.next_below(3));
    for (int64_t j = 0; j < n; ++j) p.src.push_back(4 + static_cast<int64_t>(data.next_below(10)));
    p.tgt = p.src;
    if (i % 2) p.tgt.insert(p.tgt.end(), p.src.begin(), p.src.end());
    pairs.push_back(std::move(p));
  }
  Adam opt(model.named_parameters(), AdamOptions{});
  opt.set_lr(3e-3);
  for (int step = 0; step < 300; ++step) {
    std::vector<int64_t> rows;
    for (int r = 0; r < 32; ++r) rows.push_back(static_cast<int64_t>(data.next_below(pairs.size())));
    const translation::Batch b = make_batch(pairs, rows);
    const LossSum loss = cross_entropy(model.forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths), b.tgt_out, 0.0, 0);
    opt.zero_grad();
    (loss.sum / static_cast<double>(loss.tokens)).backward();
    opt.step();
  }
  model.eval();
  std::vector<std::vector<int64_t>> sources;
  for (int i = 0; i < 96; ++i) sources.push_back(pairs[static_cast<std::size_t>(i)].src);
  for (double alpha : {0.0, 0.6, 1.0}) {
    BeamOptions first{2, alpha, 12, {}}, bound = first;
    bound.stop = BeamStop::bound;
    const auto a = beam_search_nbest(model, sources, first), b = beam_search_nbest(model, sources, bound);
    int better = 0;
    for (std::size_t i = 0; i < sources.size(); ++i) {
      INFO("alpha " << alpha << " sentence " << i);
      REQUIRE(!b[i].empty());
      // The same hypothesis may score a rounding apart in the two searches: finished sentences
      // leave the batch at other steps, and a float32 product's rounding depends on its batch.
      const double rounding = 1e-6 * (1 + std::abs(a[i].front().score));
      CHECK(b[i].front().score >= a[i].front().score - rounding);
      CHECK(b[i].size() <= 4);  // at most 2 * beam
      for (std::size_t k = 1; k < b[i].size(); ++k) CHECK(b[i][k - 1].score >= b[i][k].score);
      better += b[i].front().score > a[i].front().score + rounding;
    }
    INFO("alpha " << alpha);
    if (alpha > 0) CHECK(better > 0);  // the second copy, for some of the 96 sentences (3-4 of them here)
  }
  // The length controls on the same model. A word penalty w enters every score as
  // (log P − w·L) / lp(L), L counting the eos; a negative w (a reward per token) picks the second
  // copy more often, and bound still never stops below first-k's best.
  auto total_length = [&](const BeamOptions& o) {
    std::size_t n = 0;
    for (const auto& hyps : beam_search_nbest(model, sources, o)) n += hyps.front().tokens.size();
    return n;
  };
  BeamOptions plain{2, 0.6, 12, {}}, reward = plain;
  reward.word_penalty = -1.0;
  CHECK(total_length(reward) > total_length(plain));
  reward.word_penalty = 1.0;  // a penalty: shorter
  CHECK(total_length(reward) < total_length(plain));
  reward.word_penalty = -0.5;
  BeamOptions reward_bound = reward;
  reward_bound.stop = BeamStop::bound;
  const auto wa = beam_search_nbest(model, sources, reward), wb = beam_search_nbest(model, sources, reward_bound);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    INFO("word penalty -0.5, sentence " << i);
    CHECK(wb[i].front().score >= wa[i].front().score - 1e-6 * (1 + std::abs(wa[i].front().score)));  // as above
    for (const auto& h : wa[i]) {
      const double L = static_cast<double>(h.tokens.size() + 1);
      CHECK(h.score == Approx((h.log_prob + 0.5 * L) / std::pow((5 + L) / 6, 0.6)).epsilon(1e-12));
    }
  }
  // min_length: no hypothesis ends before 7 tokens (more than a double copy of most sources),
  // except at the length limit, |source| + max_extra.
  BeamOptions at_least{2, 0.6, 12, {}};
  at_least.min_length = 7;
  const auto m = beam_search_nbest(model, sources, at_least);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    INFO("min_length 7, sentence " << i);
    for (const auto& h : m[i]) CHECK(h.tokens.size() >= 7);
  }
  at_least.min_length = 100;  // beyond the limit: every hypothesis ends there
  const auto capped = beam_search_nbest(model, sources, at_least);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    for (const auto& h : capped[i]) CHECK(h.tokens.size() == sources[i].size() + 12);
  }
  at_least.sampling.on = true;
  CHECK_THROWS_WITH(beam_search_nbest(model, sources, at_least), Contains("min_length shapes the beam search only"));
}

TEST_CASE("n-best lists are ranked by score, start with the best, and score_pairs agrees with the loss", "[translate]") {
  const TransformerConfig c = tiny_config(5);
  Seq2SeqTransformer model(c);
  model.eval();
  Generator g(3);
  const toy::Batch b = toy::make_batch(g, 4, 10, 2, 6, false);
  const std::vector<std::vector<int64_t>> sources = sources_of(b);
  const BeamOptions o{3, 0.6, 6, {}};
  const auto nbest = beam_search_nbest(model, sources, o);
  const auto best = beam_search(model, sources, o);
  REQUIRE(nbest.size() == sources.size());
  for (std::size_t i = 0; i < nbest.size(); ++i) {
    REQUIRE(!nbest[i].empty());
    CHECK(nbest[i].size() <= 6);  // at most 2 * beam
    CHECK(nbest[i].front().tokens == best[i]);
    for (std::size_t k = 1; k < nbest[i].size(); ++k) CHECK(nbest[i][k - 1].score >= nbest[i][k].score);
    for (const auto& h : nbest[i]) CHECK(h.log_prob <= 0);
  }
  // score_pairs = minus the unsmoothed cross-entropy summed over each pair's target tokens.
  std::vector<Pair> pairs;
  for (std::size_t i = 0; i < sources.size(); ++i) pairs.push_back({sources[i], b.targets[i]});
  const auto scores = score_pairs(model, pairs, 12);  // several batches
  REQUIRE(scores.size() == pairs.size());
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const translation::Batch one = make_batch(pairs, {static_cast<int64_t>(i)});
    NoGradGuard no_grad;
    const qkgrad::LossSum l = cross_entropy(model.forward(one.src, one.src_lengths, one.tgt_in, one.tgt_lengths), one.tgt_out, 0.0,
                                    c.pad_id);
    CHECK(scores[i].tokens == static_cast<int64_t>(pairs[i].tgt.size()) + 1);
    CHECK(scores[i].log_prob == Approx(-l.sum.item()).epsilon(1e-5));
  }
}

TEST_CASE("every n-best hypothesis's log P is score_pairs' for its tokens + eos, also when the length limit ends it",
          "[translate]") {
  // An untrained model rarely ends a sentence, so most beams reach the limit |x| + 4: they end
  // there with eos scored (docs/checkpoint.md, Decoding), as teacher-forced scoring counts it.
  Seq2SeqTransformer model(tiny_config(6));
  model.eval();
  const std::vector<std::vector<int64_t>> sources = toy_sources(4, 5);
  const BeamOptions o{3, 0.6, 4, {}};
  const auto nbest = beam_search_nbest(model, sources, o);
  std::vector<Pair> pairs;
  std::vector<double> beam_log_probs;
  int64_t at_limit = 0;
  for (std::size_t i = 0; i < nbest.size(); ++i) {
    const std::size_t limit = sources[i].size() + 4;
    for (const auto& h : nbest[i]) {
      CHECK(h.tokens.size() <= limit);
      if (h.tokens.size() == limit) ++at_limit;
      const double lp = std::pow((5.0 + static_cast<double>(h.tokens.size() + 1)) / 6.0, 0.6);  // eos counted
      CHECK(h.score == Approx(h.log_prob / lp).epsilon(1e-12));
      pairs.push_back({sources[i], h.tokens});
      beam_log_probs.push_back(h.log_prob);
    }
  }
  CHECK(at_limit > 0);  // the limit's path ran
  const auto scores = score_pairs(model, pairs, 1000);
  for (std::size_t j = 0; j < pairs.size(); ++j) {
    CHECK(scores[j].tokens == static_cast<int64_t>(pairs[j].tgt.size()) + 1);
    CHECK(scores[j].log_prob == Approx(beam_log_probs[j]).epsilon(1e-5));
  }
}

TEST_CASE("an ensemble decodes with the mean of its members' log-probabilities", "[translate]") {
  Seq2SeqTransformer a(tiny_config(7));
  TransformerConfig other = tiny_config(8);  // another size and depth, the same vocabulary
  other.d_model = 24;
  other.decoder_layers = 2;
  Seq2SeqTransformer b(other);
  a.eval();
  b.eval();
  const std::vector<std::vector<int64_t>> sources = toy_sources(5, 4);
  const BeamOptions o{3, 0.6, 5, {}};
  // A model with itself is the model.
  const auto alone = beam_search_nbest(a, sources, o);
  const auto twice = beam_search_nbest(Models{&a, &a}, sources, o);
  for (std::size_t i = 0; i < sources.size(); ++i) {
    REQUIRE(alone[i].size() == twice[i].size());
    for (std::size_t k = 0; k < alone[i].size(); ++k) {
      CHECK(alone[i][k].tokens == twice[i][k].tokens);
      CHECK(alone[i][k].log_prob == Approx(twice[i][k].log_prob).epsilon(1e-12));
    }
  }
  // Two models: every hypothesis's log P is the mean of the members' (per step, so per sentence).
  const auto both = translate_all_nbest(Models{&a, &b}, sources, o, 12);
  std::vector<Pair> pairs;
  std::vector<double> ensemble_log_probs;
  for (std::size_t i = 0; i < both.size(); ++i) {
    for (const auto& h : both[i]) {
      pairs.push_back({sources[i], h.tokens});
      ensemble_log_probs.push_back(h.log_prob);
    }
  }
  const auto pa = score_pairs(a, pairs, 1000), pb = score_pairs(b, pairs, 1000);
  for (std::size_t j = 0; j < pairs.size(); ++j) {
    CHECK(ensemble_log_probs[j] == Approx((pa[j].log_prob + pb[j].log_prob) / 2).epsilon(1e-5));
  }
  // Members with another vocabulary are refused.
  TransformerConfig wider = tiny_config(9);
  wider.vocab = 15;
  Seq2SeqTransformer c(wider);
  CHECK_THROWS_WITH(beam_search_nbest(Models{&a, &c}, sources, o), Contains("ensemble: the models must share the vocabulary"));
}

TEST_CASE("sampling: top-k 1 is greedy; samples are scored as score_pairs scores them, reproducible from the seed and "
          "the line whatever the batching; the first token follows softmax(log p / T) over the top k",
          "[translate]") {
  Seq2SeqTransformer model(tiny_config(10));
  model.eval();
  const std::vector<std::vector<int64_t>> sources = toy_sources(6, 6);
  BeamOptions o{1, 0.6, 6, {}};
  o.sampling.on = true;
  o.sampling.top_k = 1;
  o.sampling.temperature = 3.0;
  const auto greedy = beam_search(model, sources, BeamOptions{1, 0.6, 6, {}});
  const auto top1 = translate_all(model, sources, o);
  CHECK(top1 == greedy);

  o.sampling.top_k = 0;
  o.sampling.temperature = 1.5;
  o.beam = 3;  // three samples per source
  o.sampling.seed = 42;
  const auto one_batch = translate_all_nbest(Models{&model}, sources, o, 100000);
  const auto small_batches = translate_all_nbest(Models{&model}, sources, o, 8);
  std::vector<Pair> pairs;
  std::vector<double> log_probs;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    REQUIRE(one_batch[i].size() == 3);
    REQUIRE(small_batches[i].size() == 3);
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(one_batch[i][k].tokens == small_batches[i][k].tokens);
      if (k > 0) CHECK(one_batch[i][k - 1].score >= one_batch[i][k].score);
      pairs.push_back({sources[i], one_batch[i][k].tokens});
      log_probs.push_back(one_batch[i][k].log_prob);
    }
  }
  const auto scores = score_pairs(model, pairs, 1000);  // log P under the model, not the tempered one
  for (std::size_t j = 0; j < pairs.size(); ++j) CHECK(scores[j].log_prob == Approx(log_probs[j]).epsilon(1e-5));
  // The line numbers seed the generators: the same source on another line samples otherwise.
  const std::vector<std::vector<int64_t>> same{sources[0], sources[0], sources[0], sources[0]};
  const auto repeated = beam_search_nbest(Models{&model}, same, o);
  bool differs = false;
  for (std::size_t i = 1; i < same.size(); ++i) differs = differs || repeated[i][0].tokens != repeated[0][0].tokens;
  CHECK(differs);
  const auto shifted = beam_search_nbest(Models{&model}, same, o, {0, 7, 8, 9});
  CHECK(shifted[0][0].tokens == repeated[0][0].tokens);
  o.sampling.seed = 43;
  CHECK(translate_all_nbest(Models{&model}, sources, o, 100000)[0][0].tokens != one_batch[0][0].tokens);

  // The first token of N samples against softmax(log p / T) over the top 4, T = 1.5.
  const int64_t N = 4000;
  o.beam = N;
  o.sampling.top_k = 4;
  o.max_extra = 1;
  const std::vector<std::vector<int64_t>> source{sources[1]};
  const auto samples = beam_search_nbest(Models{&model}, source, o);
  const TransformerConfig& c = model.config();
  std::vector<double> lp;
  {
    NoGradGuard no_grad;
    std::vector<int64_t> src = source[0];
    src.push_back(c.eos_id);
    const std::vector<int64_t> lengths{static_cast<int64_t>(src.size())};
    const Tensor memory = model.encode(Tensor::from_ids(src, {1, lengths[0]}), lengths);
    auto state = model.start_decoding(memory, lengths, 4);
    lp = log_softmax(model.decode_step(state, Tensor::from_ids({c.bos_id}, {1}))).to_vector();
  }
  std::vector<int64_t> order(lp.size());
  for (std::size_t v = 0; v < order.size(); ++v) order[v] = static_cast<int64_t>(v);
  std::sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return lp[static_cast<std::size_t>(x)] > lp[static_cast<std::size_t>(y)]; });
  std::vector<double> p(lp.size(), 0.0);
  double total = 0;
  for (int k = 0; k < 4; ++k) total += p[static_cast<std::size_t>(order[k])] = std::exp(lp[static_cast<std::size_t>(order[k])] / 1.5);
  std::vector<double> seen(lp.size(), 0.0);
  for (const auto& h : samples[0]) seen[static_cast<std::size_t>(h.tokens.empty() ? c.eos_id : h.tokens[0])] += 1.0 / N;
  for (std::size_t v = 0; v < lp.size(); ++v) {
    const double expected = p[v] / total;
    INFO("token " << v << ": expected " << expected << ", seen " << seen[v]);
    CHECK(std::fabs(seen[v] - expected) <= 5 * std::sqrt(expected * (1 - expected) / N) + 1e-12);
  }
}

TEST_CASE("argument errors are usage errors that name the option", "[translate][errors]") {
  std::string run;
  int64_t beam = 4;
  Args args("qkgrad-translate translate", "test");
  args.option("run", "run directory", &run, true);
  args.option("beam", "beam", &beam, 1, 64);
  auto parse = [&](std::vector<std::string> words) {
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    return args.parse(static_cast<int>(argv.size()), argv.data(), 0);
  };
  CHECK_THROWS_AS(parse({"--beam", "-1", "--run", "x"}), UsageError);
  CHECK_THROWS_WITH(parse({"--beam", "-1", "--run", "x"}), Contains("--beam: must be between 1 and 64, got -1"));
  CHECK_THROWS_WITH(parse({"--bogus", "--run", "r"}), Contains("The following argument was not expected: --bogus"));
  CHECK_THROWS_WITH(parse({"--beam", "3"}), Contains("--run is required"));
  CHECK_THROWS_WITH(parse({"--beam", "x", "--run", "r"}), Contains("--beam: needs an integer, got 'x'"));
  CHECK_THROWS_WITH(parse({"--run", "--beam", "3"}), Contains("--run needs a value, but the next argument is the option '--beam'"));
  CHECK(parse({"--beam=8", "--run", "r"}));
  CHECK(beam == 8);
}

TEST_CASE("Args: integers are decimal only (010 is ten, 0x10 is refused); every kind of option", "[translate][args]") {
  int threads = 0;
  int64_t steps = 5;
  uint64_t seed = 1;
  double dropout = 0;
  std::string device = "cpu", causal;
  bool json = false;
  std::string shape;
  Args args("qkgrad-bench", "test", kProgramStyle);
  args.option("threads", "CPU threads", &threads, 1, 4096)->default_str("all");
  args.option("steps", "timed steps", &steps, 1, 1000000);
  args.option("seed", "seed", &seed, 0, std::numeric_limits<int64_t>::max());
  args.option("dropout", "every dropout rate, in [0, 1)", &dropout, [](double p) { return p >= 0 && p < 1; }, "in [0, 1)")
      ->type_name("P");
  args.choice("device", "where", &device, kDeviceChoices);
  args.choice("causal", "only causal masking, or only none (default: both)", &causal, {"yes", "no"});
  args.flag("json", "one JSON line", &json);
  args.custom("shape", "B,H,T,d", "B,H,T,d", [&](const std::string& v) -> std::string {
    if (v.find(',') == std::string::npos) return "must be four positive integers B,H,T,d, got '" + v + "'";
    shape = v;
    return "";
  });
  auto parse = [&](std::vector<std::string> words) {
    std::vector<char*> argv;
    for (auto& w : words) argv.push_back(w.data());
    return args.parse(static_cast<int>(argv.size()), argv.data(), 0);
  };
  // CLI11 alone reads "010" as octal (8) and "0x10" as hex (16): Args reads decimal only.
  REQUIRE(parse({"--threads", "010", "--steps=0100", "--seed", "0010"}));
  CHECK(threads == 10);
  CHECK(steps == 100);
  CHECK(seed == 10);
  CHECK_THROWS_WITH(parse({"--threads", "0x10"}), Contains("qkgrad-bench: --threads: needs an integer, got '0x10' (see --help)"));
  CHECK_THROWS_WITH(parse({"--threads", "0"}), Contains("--threads: must be between 1 and 4096, got 0"));
  CHECK_THROWS_WITH(parse({"--threads", "99999999999999999999"}), Contains("--threads: must be between 1 and 4096, got 99999999999999999999"));
  CHECK_THROWS_WITH(parse({"--seed", "-1"}), Contains("--seed: must be between 0 and 9223372036854775807, got -1"));
  CHECK_THROWS_AS(parse({"--threads", "--steps", "3"}), UsageError);
  CHECK_THROWS_WITH(parse({"--threads", "--steps", "3"}), Contains("--threads needs a value, but the next argument is the option '--steps'"));
  // A number with any check, written back exactly; choices; a flag; a value a function reads.
  REQUIRE(parse({"--dropout", "0.1", "--device", "cuda", "--causal", "no", "--json", "--shape", "1,2,3,4"}));
  CHECK(dropout == 0.1);
  CHECK(device == "cuda");
  CHECK(causal == "no");
  CHECK(json);
  CHECK(shape == "1,2,3,4");
  CHECK_THROWS_WITH(parse({"--dropout", "1"}), Contains("--dropout: must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(parse({"--dropout", "x"}), Contains("--dropout: needs a number, got 'x'"));
  CHECK_THROWS_WITH(parse({"--device", "tpu"}), Contains("--device: must be one of cpu|cuda, got 'tpu'"));
  CHECK_THROWS_WITH(parse({"--json=false"}), Contains("json"));
  CHECK_THROWS_WITH(parse({"--shape", "7"}), Contains("--shape: must be four positive integers B,H,T,d, got '7'"));
  // kProgramStyle's --help: -h too, CLI11's labels, every integer's range.
  const std::string help = args.help();
  CHECK_THAT(help, Contains("Usage: qkgrad-bench [OPTIONS]"));
  CHECK_THAT(help, Contains("-h,--help"));
  CHECK_THAT(help, Contains("--threads N=all             CPU threads (1 to 4096)"));
  CHECK_THAT(help, Contains("--dropout P=0               every dropout rate, in [0, 1)"));
  CHECK_THAT(help, Contains("--causal yes|no"));
}

TEST_CASE("end to end: train a tiny model, resume it exactly, translate with it", "[translate][slow]") {
  TempDir tmp;
  write_number_corpus(tmp / "", 600, 2);
  TrainOptions o;
  o.settings = preset_settings("tiny");
  RunSettings& s = o.settings;
  s.data = tmp.path;
  s.vocab_size = 40;
  s.batch_tokens = 400;
  s.warmup = 20;
  s.lr = 3e-3;
  s.eval_every = 30;
  s.eval_sentences = 20;
  s.max_minutes = 0;
  s.max_steps = 60;
  s.max_length = 40;
  o.run_dir = tmp / "run";
  o.threads = 1;
  REQUIRE(train(o) == 0);
  CHECK(fs::exists(tmp / "run/checkpoints/best/model.safetensors"));
  CHECK(fs::exists(tmp / "run/curves.svg"));
  CHECK(fs::exists(tmp / "run/metrics.jsonl"));
  {  // Each evaluation records BLEU's brevity penalty and length ratio, consistent with each other.
    std::istringstream lines(read(tmp / "run/metrics.jsonl"));
    int evaluations = 0;
    for (std::string line; std::getline(lines, line);) {
      const Json j = parse_json(line, "metrics.jsonl");
      if (!j.contains("dev_bleu")) continue;
      ++evaluations;
      const double ratio = j.at("dev_length_ratio").get<double>(), bp = j.at("dev_brevity_penalty").get<double>();
      CHECK(ratio >= 0);
      CHECK(bp == Approx(ratio >= 1 ? 1.0 : ratio == 0 ? 0.0 : std::exp(1 - 1 / ratio)).epsilon(1e-12));
    }
    CHECK(evaluations == 2);  // steps 30 and 60
  }
  // Starting again into the same run is refused; nothing is overwritten.
  CHECK_THROWS_WITH(train(o), Contains("already holds a trained run; use --resume"));
  // Resume for 30 more steps.
  o.resume = true;
  s.max_steps = 90;
  REQUIRE(train(o) == 0);
  CHECK(load_trainer_state(tmp / "run/checkpoints/last").get_int("step") == 90);
  // Resuming with another attention mode is refused.
  s.attention = AttentionMode::scaled_dot;
  CHECK_THROWS_WITH(train(o), Contains("attention") && Contains("resume with the same options"));
  LoadedModel m = load_trained_model(o.run_dir);
  const auto out = translate_all(*m.model, {m.subwords->encode("dos tres")}, BeamOptions{});
  CHECK(out.size() == 1);
}
