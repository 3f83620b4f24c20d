// translation/bleu.h: sacreBLEU-compatible BLEU and chrF. Expected values come from
// sacreBLEU's own tests and documentation where they exist (each case says where), and from
// hand computation otherwise (the arithmetic is in the comments).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/json.h"
#include "translation/bleu.h"
#include "translation/score_report.h"

using namespace qkgrad;
using namespace qkgrad::translation;
using Catch::Matchers::Contains;

namespace {

using Lines = std::vector<std::string>;

// sacreBLEU's README example: three system sentences and (the first of) its reference sets.
const Lines kReadmeSystem = {"The dog bit the man.", "It wasn't surprising.",
                             "The man had just bitten him."};
const Lines kReadmeReference = {"The dog bit the man.", "It was not unexpected.",
                                "The man bit him first."};

// sacreBLEU issue #98 (test_sentence_bleu.py): Romanian, with t-cedilla vs t-comma.
const std::string kSys98 =
    "Producția de zahăr primă va fi exprimată în ceea ce privește zahărul alb;";
const std::string kRef98 = "producţia de zahăr brut se exprimă în zahăr alb;";

double bleu(const Lines& hyps, const Lines& refs, BleuTokenize tok = BleuTokenize::t13a) {
  return corpus_bleu(hyps, refs, tok).score;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The 13a tokenizer (expected outputs follow sacreBLEU's TokenizerV13a regular expressions)
// ---------------------------------------------------------------------------------------------

TEST_CASE("tokenize_13a: punctuation and symbols are split off", "[bleu]") {
  CHECK(tokenize_13a("Hello, world!") == "Hello , world !");
  CHECK(tokenize_13a("(hi)") == "( hi )");
  CHECK(tokenize_13a("end.") == "end .");
  CHECK(tokenize_13a("Wait...what?") == "Wait . . . what ?");
  CHECK(tokenize_13a("Mr. Smith's e-mail: a.b@c.com") == "Mr . Smith's e-mail : a . b @ c . com");
  CHECK(tokenize_13a("[a]{b}|c~d^e_f`g") == "[ a ] { b } | c ~ d ^ e _ f ` g");
  CHECK(tokenize_13a("#1 @2 *3 +4 =5 ;6 ?7 /8 \\9") ==
        "# 1 @ 2 * 3 + 4 = 5 ; 6 ? 7 / 8 \\ 9");
  // Apostrophes and hyphens between letters stay inside the word.
  CHECK(tokenize_13a("don't") == "don't");
  CHECK(tokenize_13a("well-known A-1") == "well-known A-1");
}

TEST_CASE("tokenize_13a: numbers keep their inner periods and commas", "[bleu]") {
  CHECK(tokenize_13a("It costs $1,000.50, or 3.5%.") == "It costs $ 1,000.50 , or 3.5 % .");
  CHECK(tokenize_13a("1.5.2019 and v1.2.") == "1.5.2019 and v1.2 .");
  CHECK(tokenize_13a("a,b 1,2") == "a , b 1,2");
  // A period between a digit and a non-digit (either order) is split off.
  CHECK(tokenize_13a("x.5 5.x") == "x . 5 5 . x");
  // A hyphen after a digit is split off; one before a digit is not.
  CHECK(tokenize_13a("1990-2000") == "1990 - 2000");
  CHECK(tokenize_13a("3-") == "3 -");
}

TEST_CASE("tokenize_13a: HTML entities, <skipped> and line breaks", "[bleu]") {
  CHECK(tokenize_13a("&quot;Quoted&quot; &amp; &lt;tag&gt;") == "\" Quoted \" & < tag >");
  CHECK(tokenize_13a("R&amp;D") == "R & D");
  CHECK(tokenize_13a("x&y") == "x & y");
  CHECK(tokenize_13a("&amp;lt;") == "<");  // unescaped in sequence: &amp; first, then &lt;
  CHECK(tokenize_13a("a<skipped>b") == "ab");
  CHECK(tokenize_13a("hyphen-\nated line\nbreak") == "hyphenated line break");
}

TEST_CASE("tokenize_13a: Unicode text and whitespace", "[bleu]") {
  CHECK(tokenize_13a("naïve café.") == "naïve café .");
  CHECK(tokenize_13a("é.a 3.é é,3") == "é . a 3 . é é , 3");
  CHECK(tokenize_13a("Ünïcödé„Zitat“ – „mehr“.") == "Ünïcödé„Zitat“ – „mehr“ .");
  // No-break space, ideographic space, thin space: whitespace to Python's str.split().
  CHECK(tokenize_13a("a\u00a0b\u3000c\u2009d") == "a b c d");
  // U+200B ZERO WIDTH SPACE is not whitespace there, so it stays.
  CHECK(tokenize_13a("a\u200bb") == "a\u200bb");
  CHECK(tokenize_13a(" a \t b  ") == "a b");
  CHECK(tokenize_13a("") == "");
  CHECK(tokenize_13a("   ") == "");
}

// ---------------------------------------------------------------------------------------------
// BLEU
// ---------------------------------------------------------------------------------------------

TEST_CASE("corpus_bleu: identical hypothesis and reference score 100", "[bleu]") {
  const BleuScore s = corpus_bleu(kReadmeSystem, kReadmeSystem);
  CHECK(s.score == Approx(100.0).margin(1e-12));
  CHECK(s.score <= 100.0);  // exp(log 100) is 100.00000000000004; found by fuzz/fuzz_bleu.cpp
  // The line sacreBLEU 2.x prints for this corpus.
  CHECK(s.format() ==
        "BLEU = 100.00 100.0/100.0/100.0/100.0 (BP = 1.000 ratio = 1.000 hyp_len = 17 "
        "ref_len = 17)");
}

TEST_CASE("corpus_bleu: sacreBLEU README example with a single reference", "[bleu]") {
  // sacreBLEU 2.x output for the README system against its first reference set.
  const BleuScore s = corpus_bleu(kReadmeSystem, kReadmeReference);
  CHECK(s.format() ==
        "BLEU = 45.07 70.6/42.9/36.4/37.5 (BP = 1.000 ratio = 1.000 hyp_len = 17 ref_len = 17)");
  // By hand: matches 12/17, 6/14, 4/11, 3/8 and no brevity penalty.
  const double expected = 100.0 * std::pow(12.0 / 17 * 6.0 / 14 * 4.0 / 11 * 3.0 / 8, 0.25);
  CHECK(s.score == Approx(expected).epsilon(1e-12));
  CHECK(s.precision[0] == Approx(100.0 * 12 / 17).epsilon(1e-12));
  CHECK(s.precision[3] == Approx(37.5).epsilon(1e-12));
}

TEST_CASE("bleu_from_stats: sacreBLEU README example (two references)", "[bleu]") {
  // The README's two-reference score, 48.530827 (test_bleu.py), and its printed line. With
  // two references the statistics are: matches 14/17, 7/14, 5/11, 3/8; closest ref_len 18.
  BleuStats stats;
  stats.hyp_len = 17;
  stats.ref_len = 18;
  const int64_t correct[4] = {14, 7, 5, 3}, total[4] = {17, 14, 11, 8};
  for (int n = 0; n < 4; ++n) {
    stats.correct[n] = correct[n];
    stats.total[n] = total[n];
  }
  const BleuScore s = bleu_from_stats(stats);
  CHECK(s.score == Approx(48.530827).margin(1e-6));
  CHECK(s.format() ==
        "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 ref_len = 18)");
}

TEST_CASE("bleu_from_stats: sacreBLEU test_scoring case", "[bleu]") {
  // test_bleu.py: correct [9, 7, 5, 3], total [10, 8, 6, 4], lengths 11 and 11 -> 0.8375922397.
  BleuStats stats;
  stats.hyp_len = stats.ref_len = 11;
  const int64_t correct[4] = {9, 7, 5, 3}, total[4] = {10, 8, 6, 4};
  for (int n = 0; n < 4; ++n) {
    stats.correct[n] = correct[n];
    stats.total[n] = total[n];
  }
  CHECK(bleu_from_stats(stats).score / 100 == Approx(0.8375922397).margin(1e-8));
}

TEST_CASE("corpus_bleu: sacreBLEU test_sentence_bleu (issue #98)", "[bleu]") {
  // Expected 8.493 with 13a and 7.347 with tokenize none (tolerance 1e-3 as in sacreBLEU).
  const BleuScore t13a = corpus_bleu({kSys98}, {kRef98});
  CHECK(t13a.score == Approx(8.493).margin(1e-3));
  CHECK(t13a.hyp_len == 14);
  CHECK(t13a.ref_len == 10);
  const BleuScore none = corpus_bleu({kSys98}, {kRef98}, BleuTokenize::none);
  CHECK(none.score == Approx(7.347).margin(1e-3));
  CHECK(none.hyp_len == 13);
  CHECK(none.ref_len == 9);
}

TEST_CASE("corpus_bleu_stats: sacreBLEU test_statistics case", "[bleu]") {
  // test_bleu.py: common [4, 2, 1, 0], total [6, 5, 4, 3].
  for (BleuTokenize tok : {BleuTokenize::t13a, BleuTokenize::none}) {
    const BleuStats s = corpus_bleu_stats({"am I am a character sequence"},
                                          {"I am a symbol string sequence a a"}, tok);
    CHECK(std::vector<int64_t>(s.correct, s.correct + 4) == std::vector<int64_t>{4, 2, 1, 0});
    CHECK(std::vector<int64_t>(s.total, s.total + 4) == std::vector<int64_t>{6, 5, 4, 3});
    CHECK(s.hyp_len == 6);
    CHECK(s.ref_len == 8);
  }
}

TEST_CASE("corpus_bleu: no overlap scores 0 (sacreBLEU issue #141)", "[bleu]") {
  const BleuScore s = corpus_bleu({"this is a cat"}, {"okay thanks"});
  CHECK(s.score == 0.0);
  // Without any match, sacreBLEU reports every precision as 0 (no smoothing applied).
  CHECK(s.format() ==
        "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 1.000 ratio = 2.000 hyp_len = 4 ref_len = 2)");
  // test_raw_bleu: two system lines against references that share nothing.
  CHECK(bleu({"this is a test", "another test"}, {"ref1", "ref2"}) == 0.0);
}

TEST_CASE("corpus_bleu: 'exp' smoothing of orders without matches", "[bleu]") {
  // One zero order: p = 3/4, 2/3, 1/2 and 100 / (2 * 1) percent -> (1/8)^(1/4).
  CHECK(bleu({"this is a fest"}, {"this is a test"}) ==
        Approx(100.0 * std::pow(0.125, 0.25)).epsilon(1e-12));
  // Two zero orders: p = 3/4, 1/3, then 100 / (2 * 2) and 100 / (4 * 1) percent -> 2^(-3/2).
  const BleuScore s = corpus_bleu({"a b c d"}, {"a b x d"});
  CHECK(s.precision[2] == Approx(25.0).epsilon(1e-15));
  CHECK(s.precision[3] == Approx(25.0).epsilon(1e-15));
  CHECK(s.score == Approx(100.0 * std::pow(2.0, -1.5)).epsilon(1e-12));
}

TEST_CASE("corpus_bleu: brevity penalty", "[bleu]") {
  // 5 words against 6, all n-grams correct: BLEU = 100 exp(1 - 6/5).
  const BleuScore s = corpus_bleu({"the cat sat on the"}, {"the cat sat on the mat"});
  CHECK(s.brevity_penalty == Approx(std::exp(-0.2)).epsilon(1e-15));
  CHECK(s.score == Approx(100.0 * std::exp(-0.2)).epsilon(1e-12));
  CHECK(s.format() ==
        "BLEU = 81.87 100.0/100.0/100.0/100.0 (BP = 0.819 ratio = 0.833 hyp_len = 5 ref_len = 6)");
  // Longer hypotheses are not rewarded: BP stays 1.
  CHECK(corpus_bleu({"the cat sat on the mat ."}, {"the cat sat on the mat"}).brevity_penalty ==
        1.0);
  // A corpus with no 4-gram at all scores 0, as in sacreBLEU (smoothing needs a count).
  const BleuScore short_one = corpus_bleu({"the cat sat"}, {"the cat sat on the mat"});
  CHECK(short_one.score == 0.0);
  CHECK(short_one.format() ==
        "BLEU = 0.00 100.0/100.0/100.0/0.0 (BP = 0.368 ratio = 0.500 hyp_len = 3 ref_len = 6)");
}

TEST_CASE("corpus_bleu: empty hypotheses score 0 with BP 0", "[bleu]") {
  // test_bleu.py: ('', '', '') against the README references -> 0.0.
  const BleuScore s = corpus_bleu({"", "", ""}, kReadmeReference);
  CHECK(s.score == 0.0);
  CHECK(s.format() ==
        "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 17)");
}

TEST_CASE("corpus_bleu: matches are clipped to the reference counts", "[bleu]") {
  // "the" x4 against a reference with one "the": 1-gram precision 1/4, and no higher matches.
  const BleuStats s = corpus_bleu_stats({"the the the the"}, {"the cat"});
  CHECK(s.correct[0] == 1);
  CHECK(s.total[0] == 4);
  CHECK(s.correct[1] == 0);
}

TEST_CASE("corpus_bleu: 13a versus none tokenization", "[bleu]") {
  // Detokenized hypothesis, tokenized reference: 13a makes them equal, none does not.
  CHECK(bleu({"Hello, world!"}, {"Hello , world !"}) == Approx(100.0).margin(1e-12));
  const BleuStats none = corpus_bleu_stats({"Hello, world!"}, {"Hello , world !"},
                                           BleuTokenize::none);
  CHECK(none.hyp_len == 2);
  CHECK(none.ref_len == 4);
  CHECK(none.correct[0] == 0);
  // none still splits on any whitespace, tabs and trailing spaces included.
  CHECK(bleu({"a b\tc  d  "}, {"a b c d"}, BleuTokenize::none) == Approx(100.0).margin(1e-12));
}

TEST_CASE("corpus_bleu: statistics of parts add up to the whole", "[bleu]") {
  BleuStats parts = corpus_bleu_stats({kReadmeSystem[0]}, {kReadmeReference[0]});
  parts += corpus_bleu_stats({kReadmeSystem[1], kReadmeSystem[2]},
                             {kReadmeReference[1], kReadmeReference[2]});
  const BleuScore whole = corpus_bleu(kReadmeSystem, kReadmeReference);
  CHECK(bleu_from_stats(parts).score == whole.score);
}

TEST_CASE("corpus_bleu and corpus_chrf: an empty reference line is scored, as sacreBLEU 2.6 does", "[bleu]") {
  // By hand: hypothesis n-grams 6/4/2/1 (the second line's "x y" adds 2 and 1 and matches
  // nothing), matches 4/3/2/1; hypothesis length 6 >= reference length 4, so BP 1;
  // BLEU = 100 · (4/6 · 3/4 · 2/2 · 1/1)^(1/4) = 100 · 0.5^0.25.
  const BleuScore b = corpus_bleu({"a b c d", "x y"}, {"a b c d", ""});
  CHECK(b.score == Approx(100.0 * std::pow(0.5, 0.25)).epsilon(1e-12));
  CHECK(b.ref_len == 4);
  CHECK(b.hyp_len == 6);
  // chrF: a hypothesis against an empty reference adds no n-grams of its own (sacreBLEU counts
  // only orders the reference has), so the score is that of the first pair alone.
  CHECK(corpus_chrf({"a b c d", "x y"}, {"a b c d", ""}) == Approx(100.0));
  CHECK(corpus_chrf({"abcd", ""}, {"abce", ""}) == Approx(corpus_chrf({"abcd"}, {"abce"})));
}

TEST_CASE("corpus_bleu and corpus_chrf: clear errors", "[bleu]") {
  CHECK_THROWS_WITH(corpus_bleu({"a", "b", "c"}, {"a", "b"}),
                    Contains("BLEU: 3 hypothesis lines but 2 reference lines"));
  CHECK_THROWS_WITH(corpus_chrf({"a"}, {"a", "b"}),
                    Contains("chrF: 1 hypothesis lines but 2 reference lines"));
  CHECK_THROWS_WITH(corpus_bleu({"a", "b"}, ReferenceStreams{{"a", "b"}, {"a"}}, ScoringOptions{}),
                    Contains("BLEU: 2 hypothesis lines but 1 reference 2 lines"));
  CHECK_THROWS_WITH(corpus_bleu({"a"}, ReferenceStreams{{"a"}, {"\xff"}}, ScoringOptions{}),
                    Contains("reference 2 line 1 is not valid UTF-8"));
  CHECK_THROWS_WITH(corpus_bleu({}, {}), Contains("corpus is empty"));
  CHECK_THROWS_WITH(corpus_chrf({"a", "b\xff"}, {"a", "b"}),
                    Contains("hypothesis line 2 is not valid UTF-8 (byte 0xFF at byte offset 1)"));
  // Overlong encodings and surrogates are invalid too.
  CHECK_THROWS_AS(corpus_bleu({"\xc0\xaf"}, {"a"}), Error);
  CHECK_THROWS_AS(corpus_bleu({"a"}, {"\xed\xa0\x80"}), Error);
}

TEST_CASE("several references: n-grams clipped by the reference where they occur most, the closest length",
          "[bleu]") {
  // By hand. Hypothesis "a b c d" (4 words); references "a b x y" (4) and "x b c d e" (5): the
  // closest length is 4. Matches: 1-grams a (first), b, c, d (second) 4/4; 2-grams a b, b c, c d
  // 3/3; 3-grams b c d 1/2; 4-grams 0/1, smoothed to 100 / (2 · 1) = 50.
  // BLEU = (100 · 100 · 50 · 50)^(1/4) = 70.71.
  const BleuScore two = corpus_bleu({"a b c d"}, ReferenceStreams{{"a b x y"}, {"x b c d e"}}, ScoringOptions{});
  CHECK(two.score == Approx(std::sqrt(100.0 * 50.0)).epsilon(1e-12));
  CHECK(two.ref_len == 4);
  CHECK(two.format() == "BLEU = 70.71 100.0/100.0/50.0/50.0 (BP = 1.000 ratio = 1.000 hyp_len = 4 ref_len = 4)");
  // Against the first alone: 2/4, 1/3, 0/2 -> 100/(2·2) = 25, 0/1 -> 100/(4·1) = 25.
  const BleuScore one = corpus_bleu({"a b c d"}, {"a b x y"});
  CHECK(one.score == Approx(std::pow(50.0 * (100.0 / 3.0) * 25.0 * 25.0, 0.25)).epsilon(1e-12));
  // A clipped count takes the largest count in any one reference, not their sum: "a a a" against
  // "a" and "a a" matches 2 unigrams, not 3.
  CHECK(segment_bleu_stats({"a a a"}, ReferenceStreams{{"a"}, {"a a"}}, ScoringOptions{})[0].correct[0] == 2);
  // Equally close lengths (3 and 5 for 4 words): the shorter.
  CHECK(segment_bleu_stats({"a b c d"}, ReferenceStreams{{"a b c d e"}, {"a b c"}}, ScoringOptions{})[0].ref_len == 3);
  // An empty reference of a segment is left out when it has others; nrefs counts what is left.
  const ReferenceStreams refs{{"a b c d", ""}, {"a b c d", "a b c d"}};
  CHECK(corpus_bleu({"a b c d", "a b c d"}, refs, ScoringOptions{}).score == Approx(100.0));
  CHECK(reference_count(refs) == "var");
  CHECK(reference_count(ReferenceStreams{{"x", "y"}, {"x", "y"}}) == "2");
  CHECK(reference_count(ReferenceStreams{{"x", ""}}) == "1");
  // chrF takes each segment's best reference: a perfect one gives 100.
  CHECK(corpus_chrf({"abc"}, ReferenceStreams{{"xyz"}, {"abc"}}, ScoringOptions{}) == Approx(100.0));
  CHECK(corpus_chrf({"abc"}, ReferenceStreams{{"abc"}, {"xyz"}}, ScoringOptions{}) == Approx(100.0));
  // One stream gives what the one-reference functions give.
  const std::vector<std::string> hyps{"The cat sat on the mat.", "Hello there, my friend!"};
  const std::vector<std::string> ref{"The cat is on the mat.", "hello there my good friend!"};
  CHECK(corpus_bleu(hyps, ReferenceStreams{ref}, ScoringOptions{}).score == corpus_bleu(hyps, ref).score);
  CHECK(corpus_chrf(hyps, ReferenceStreams{ref}, ScoringOptions{}) == corpus_chrf(hyps, ref));
}

TEST_CASE("sentence-level BLEU uses the effective order; chrF per sentence", "[bleu]") {
  // "a b c" has no 4-grams: corpus BLEU is 0, sentence BLEU (orders 1..3) is 100.
  CHECK(corpus_bleu({"a b c"}, {"a b c"}).score == 0.0);
  const std::vector<BleuScore> s = sentence_bleu({"a b c", "a b x y"}, ReferenceStreams{{"a b c", "a b c d"}}, ScoringOptions{});
  REQUIRE(s.size() == 2);
  CHECK(s[0].score == Approx(100.0));
  // By hand: 2/4, 1/3, 0/2 -> 100/(2·2) = 25, 0/1 -> 100/(4·1) = 25 (all four orders present).
  CHECK(s[1].score == Approx(std::pow(50.0 * (100.0 / 3.0) * 25.0 * 25.0, 0.25)).epsilon(1e-12));
  // Hand-computed: "Hello there , my friend !" against "hello there my good friend !":
  // 4/6, 1/5, 0/4 -> 12.5, 0/3 -> 8.33; (66.67 · 20 · 12.5 · 8.33)^(1/4) = 19.30.
  const std::vector<BleuScore> h =
      sentence_bleu({"Hello there, my friend!"}, ReferenceStreams{{"hello there my good friend!"}}, ScoringOptions{});
  CHECK(h[0].score == Approx(std::pow((400.0 / 6.0) * 20.0 * 12.5 * (100.0 / 12.0), 0.25)).epsilon(1e-12));
  const std::vector<double> c = sentence_chrf({"abcd", "abcd"}, ReferenceStreams{{"abcd", "wxyz"}}, ScoringOptions{});
  CHECK(c[0] == Approx(100.0));
  CHECK(c[1] == 0.0);
}

TEST_CASE("--lowercase: Python's str.lower() of every line first", "[bleu]") {
  CHECK(lowercase_utf8("The CAT") == "the cat");
  CHECK(lowercase_utf8("ÀÉÎÕÜ ÇÑ") == "àéîõü çñ");
  CHECK(lowercase_utf8("ΑΘΗΝΑ ΣΟΦΟΣ Σ") == "αθηνα σοφος σ");  // final sigma at a word's end only
  CHECK(lowercase_utf8("İSTANBUL") == "i\xcc\x87stanbul");     // İ: i + combining dot above
  CHECK(lowercase_utf8("ДОМ") == "дом");
  const ScoringOptions lc{BleuTokenize::t13a, true};
  CHECK(corpus_bleu({"THE CAT SAT ON THE MAT"}, ReferenceStreams{{"the cat sat on the mat"}}, lc).score == Approx(100.0));
  CHECK(corpus_bleu({"THE CAT SAT ON THE MAT"}, ReferenceStreams{{"the cat sat on the mat"}}, ScoringOptions{}).score == 0.0);
  CHECK(corpus_chrf({"ABC"}, ReferenceStreams{{"abc"}}, lc) == Approx(100.0));
  CHECK(bleu_signature(lc, "1", false) == std::string("nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:qkgrad-") + QKGRAD_VERSION);
}

// ---------------------------------------------------------------------------------------------
// chrF
// ---------------------------------------------------------------------------------------------

TEST_CASE("corpus_chrf: published sacreBLEU values", "[bleu]") {
  // The chrF metric card's example (sacreBLEU CHRF defaults): 84.64214891738334.
  CHECK(corpus_chrf({"The relationship between cats and dogs is not exactly friendly.",
                     "a good bookshop is just a genteel black hole that knows how to read."},
                    {"The relationship between dogs and cats is not exactly friendly.",
                     "A good bookshop is just a genteel Black Hole that knows how to read."}) ==
        Approx(84.64214891738334).margin(1e-9));
  // The same card's single-sentence example: 61.576379378113785.
  CHECK(corpus_chrf({"The relationship between Obama and Netanyahu is not exactly friendly."},
                    {"The ties between Obama and Netanyahu are not particularly friendly."}) ==
        Approx(61.576379378113785).margin(1e-9));
}

TEST_CASE("corpus_chrf: sacreBLEU effective-order cases", "[bleu]") {
  // test_chrf.py test_cases_effective_order; in these P = R, so beta does not matter.
  CHECK(corpus_chrf({"a"}, {"a"}) == Approx(100.0).margin(1e-9));
  CHECK(corpus_chrf({""}, {"reference"}) == 0.0);
  CHECK(corpus_chrf({"a b c"}, {"a b c"}) == Approx(100.0).margin(1e-9));
  CHECK(corpus_chrf({"a b c"}, {"abc"}) == Approx(100.0).margin(1e-9));  // whitespace removed
  CHECK(corpus_chrf({""}, {"c"}) == 0.0);
  CHECK(corpus_chrf({"a", "b"}, {"a", "c"}) == Approx(50.0).margin(1e-9));
  CHECK(corpus_chrf({"aa"}, {"ab"}) == Approx(25.0).margin(1e-9));
}

TEST_CASE("corpus_chrf: hand-computed values", "[bleu]") {
  // "ab" vs "abc": order 1 P = 2/2, R = 2/3; order 2 P = 1/1, R = 1/2; order 3 has no
  // hypothesis n-gram, so it is left out. P = 1, R = 7/12, chrF = 100 * 5PR / (4P + R) = 700/11.
  CHECK(corpus_chrf({"ab"}, {"abc"}) == Approx(700.0 / 11).epsilon(1e-12));
  // Characters are code points, not bytes: "éa" vs "ea" matches one of two characters.
  CHECK(corpus_chrf({"éa"}, {"ea"}) == Approx(25.0).margin(1e-9));
  CHECK(corpus_chrf({"é"}, {"é"}) == Approx(100.0).margin(1e-9));
  // Any Unicode whitespace is removed before counting.
  CHECK(corpus_chrf({"a\u00a0b\u3000c"}, {"abc"}) == Approx(100.0).margin(1e-9));
  CHECK(corpus_chrf({"xyz"}, {"abc"}) == 0.0);
}

// ---------------------------------------------------------------------------------------------
// The report forms (translation/score_report.h)
// ---------------------------------------------------------------------------------------------

TEST_CASE("score_report: sacreBLEU's text form, bare scores, JSON, sentence level", "[bleu]") {
  const std::vector<std::string> hyps{"a b c d e", "f g h"};
  const ReferenceStreams refs{{"a b c d e", "f g x"}};
  const std::string v = std::string("version:qkgrad-") + QKGRAD_VERSION;
  ReportOptions o;
  const BleuScore b = corpus_bleu(hyps, refs, o.scoring);
  char chrf[32];
  std::snprintf(chrf, sizeof chrf, "%.2f", corpus_chrf(hyps, refs, o.scoring));
  CHECK(score_report(hyps, refs, o) ==
        "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|" + v + " = " + b.format().substr(7) + "\n" +
            "chrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|" + v + " = " + chrf + "\n");
  o.format = ScoreFormat::score_only;
  o.chrf = false;
  o.width = 1;
  char expected[32];
  std::snprintf(expected, sizeof expected, "%.1f\n", b.score);
  CHECK(score_report(hyps, refs, o) == expected);
  o.format = ScoreFormat::json;
  o.chrf = true;
  const Json j = Json::parse(score_report(hyps, refs, o));
  REQUIRE(j.is_array());
  REQUIRE(j.size() == 2);
  CHECK(j[0]["name"] == "BLEU");
  CHECK(j[0]["score"].get<double>() == Approx(b.score).margin(0.05));
  CHECK(j[0]["tok"] == "13a");
  CHECK(j[0]["nrefs"] == "1");
  CHECK(j[0]["verbose_score"] == b.verbose());
  CHECK(j[1]["name"] == "chrF2");
  CHECK(j[1]["nc"] == "6");
  CHECK(!j[1].contains("verbose_score"));
  // Sentence level: one line per hypothesis (JSON Lines in json), effective order.
  o.sentence_level = true;
  CHECK_THROWS_WITH(score_report(hyps, refs, o), Contains("one metric at a time"));
  o.chrf = false;
  const std::string lines = score_report(hyps, refs, o);
  const std::size_t newline = lines.find('\n');
  REQUIRE(newline != std::string::npos);
  CHECK(Json::parse(lines.substr(0, newline))["score"].get<double>() == Approx(100.0));
  CHECK(Json::parse(lines.substr(newline + 1))["eff"] == "yes");
  o.format = ScoreFormat::text;
  CHECK(lines.size() > 0);
  CHECK(score_report(hyps, refs, o).rfind("BLEU|nrefs:1|case:mixed|eff:yes|", 0) == 0);
}
