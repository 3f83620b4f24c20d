// The default corpus of the translation example: Spanish -> English verse pairs from two
// public-domain Bibles, the Reina-Valera 1909 (SWORD module spaRV1909eb, Debian package
// sword-text-sparv) and the World English Bible (engWEB2015eb, package sword-text-web), read
// with the SWORD command-line tool diatheke (package diatheke).
//
// The pipeline, one step per function below:
//   1. run diatheke, once per testament and module, in its OSIS output format
//      (run_diatheke in bible.cpp, with run_program of corpora/process.h);
//   2. parse its output into verses keyed by (book, chapter, verse)   parse_diatheke_output
//   3. clean every verse: markup, footnotes, Strong's numbers, ...    clean_verse & co.
//      (corpora/bible_text.h), per module                             clean_spanish/_english
//   4. align the two Bibles by reference and drop doubtful pairs      align_verses
//   5. split by whole books, so parallel passages cannot leak         split_of_book
//   6. write OUT/{train,dev,test}.{es,en} and OUT/stats.txt           prepare_bible
// docs/bible-corpus.md explains every rule with the real examples it was made for, and gives
// the counts it produces.
#pragma once

#include <array>
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "corpora/bible_text.h"

namespace qkgrad::corpora {

// ---- Books and the split ----------------------------------------------------------------

enum class Split { train = 0, dev = 1, test = 2 };
inline constexpr std::size_t kSplits = 3;

// "train", "dev" or "test".
const char* split_name(Split split);

// The 66 books of the Protestant canon in canonical order, named exactly as diatheke prints
// them with its English locale ("-l en"): "Genesis", ..., "I Samuel", ..., "Song of Solomon",
// ..., "Revelation of John". Genesis..Malachi are the Old Testament (the first 39).
const std::vector<std::string>& bible_books();

// The position of `book` in bible_books() (0 = Genesis), or -1 for a name not in the list.
int book_index(const std::string& book);

// Which split a whole book belongs to. Dev: Ezekiel and Romans; test: Daniel and Acts; every
// other book: train (docs/bible-corpus.md says why these four). Throws qkgrad::Error for a name
// that is not in bible_books().
Split split_of_book(const std::string& book);

// ---- Parsing diatheke's output ----------------------------------------------------------

struct VerseRef {
  std::string book;  // as in bible_books()
  int chapter = 0;
  int verse = 0;
};

// "Psalms 3:1".
std::string to_string(const VerseRef& ref);

// One verse as diatheke printed it: `heading` is text printed on the verse's line before its
// reference (the WEB's Psalm titles, "ALEPH" in Psalm 119, the speaker labels of the Song of
// Solomon), `text` everything after "Book C:V: ", still with its markup.
struct RawVerse {
  VerseRef ref;
  std::string heading;
  std::string text;
};

// Splits diatheke's output into verses. A line holding a reference "Book C:V: " of a book in
// bible_books() starts a verse; a line without one continues the verse before it (joined with
// a space; blank lines are skipped); the closing line "(<module>)" diatheke prints is skipped.
// Works for diatheke's plain and OSIS formats. Throws qkgrad::Error, naming the line, for text
// before the first verse and for a line that looks like a reference of an unknown book.
std::vector<RawVerse> parse_diatheke_output(const std::string& output, const std::string& module);

// ---- Cleaning one verse -----------------------------------------------------------------

// clean_verse, remove_zero_width, utf8_length, capitalised_words,
// undo_drop_capital, strip_subscription and strip_appendix: corpora/bible_text.h (included).

// ---- Aligning the two Bibles ------------------------------------------------------------

// A verse after cleaning.
struct Verse {
  VerseRef ref;
  std::string text;
};

// Cleans every verse of the Spanish module: clean_verse, the subscriptions of the epistles and
// the drop capital of every chapter. Headings are dropped (the RV1909 has none: its Psalm
// titles are part of verse 1).
std::vector<Verse> clean_spanish(const std::vector<RawVerse>& raw);

// Cleans every verse of the English module: clean_verse, the glossary, and the headings: in
// the Psalms a heading (the Psalm's title, a letter of Psalm 119) is put before the verse's
// text, as the RV1909 has it; elsewhere (the Song of Solomon's speaker labels) it is dropped.
// The WEB has no drop capitals, so its capitals ("ALEPH", "MENE, MENE") are left as they are.
std::vector<Verse> clean_english(const std::vector<RawVerse>& raw);

// Why a verse is not in the corpus.
enum class DropReason {
  missing_spanish = 0,  // the reference is only in the English module
  missing_english,      // only in the Spanish module
  invalid_utf8,         // one side is not valid UTF-8
  empty_spanish,        // the Spanish verse is empty after cleaning
  empty_english,        // the English verse is empty after cleaning
  chapter_misaligned,   // in a chapter whose verse numbers evidently differ (see below)
  length_ratio,         // one side more than kMaxLengthRatio times as long as the other
};
inline constexpr std::size_t kDropReasons = 7;

// "missing in Spanish", ...
const char* drop_reason_name(DropReason reason);

// A pair is dropped when one text has more than twice as many characters (code points) as the
// other: across the whole Bible the Spanish/English ratio has median 0.96 and 99.8% of the
// verses lie within [0.5, 2]; the pairs outside are mostly verses numbered differently.
inline constexpr double kMaxLengthRatio = 2.0;

// A chapter is dropped whole when the mean of |ln(spanish length / english length)| over its
// verse pairs exceeds this: ordinary chapters average 0.11 (99th percentile 0.21); a chapter
// whose verse numbers are shifted by the module converters (Numbers 13, Job 40, Jonah 2, ...)
// averages 0.25-0.53, and its pairs would be translations of different verses.
inline constexpr double kMaxChapterMisfit = 0.23;

// max(a, b) / min(a, b) of the lengths in code points (both must be non-empty).
double length_ratio(const std::string& a, const std::string& b);

struct VersePair {
  VerseRef ref;
  std::string spanish;
  std::string english;
};

struct Alignment {
  std::vector<VersePair> pairs;                     // kept, in canonical order
  std::array<std::size_t, kDropReasons> dropped{};  // verses dropped, by DropReason
  std::vector<std::string> misaligned_chapters;     // "Job 40", in canonical order
};

// Pairs the verses of both modules by reference and applies the drop rules above, in the
// order of DropReason. Throws qkgrad::Error for a reference that occurs twice in one module.
Alignment align_verses(const std::vector<Verse>& spanish, const std::vector<Verse>& english);

// ---- The whole pipeline -----------------------------------------------------------------

struct BibleOptions {
  std::string out_dir;                          // created when missing
  std::string diatheke = "diatheke";            // program name (found on PATH) or path
  std::string spanish_module = "spaRV1909eb";   // Debian package sword-text-sparv
  std::string english_module = "engWEB2015eb";  // Debian package sword-text-web
  double timeout_seconds = 300;                 // per diatheke run; it is then killed
};

struct BibleStats {
  std::array<std::size_t, kSplits> verses{};            // pairs per split (index: Split)
  std::array<std::size_t, kDropReasons> dropped{};      // by DropReason
  std::array<std::vector<std::string>, kSplits> books;  // books per split, canonical order
  std::vector<std::string> misaligned_chapters;         // chapters dropped whole
  std::string spanish_module, english_module;
  std::string diatheke_version;                  // "4.8 (SWORD: 1.9.0)"
  // From the modules' .conf files: "Reina Valera 1909, version 2.60 of 2022-12-23".
  std::string spanish_version, english_version;

  std::size_t total_verses() const;
  std::size_t total_dropped() const;
  // What stats.txt holds: versions, counts per split, drops by reason, books per split.
  std::string summary() const;
};

// Builds the corpus into options.out_dir: train.es/.en, dev.es/.en, test.es/.en (one verse per
// line, line i of X.es translated by line i of X.en) and stats.txt, each written atomically.
// Throws qkgrad::Error with what to do when diatheke or a module is missing (naming the apt
// packages), when diatheke fails or runs past the timeout, or when a file cannot be written.
BibleStats prepare_bible(const BibleOptions& options);

// ---- The English text alone: qkgrad-lm's default corpus ---------------------------------

struct EnglishTextStats {
  std::array<std::size_t, kSplits> verses{}, bytes{};  // per split (index: Split)
  std::size_t dropped = 0;                             // empty after cleaning, or not UTF-8
  std::string english_module, english_version, diatheke_version;
  std::string summary() const;  // what stats.txt holds
};

// "train.txt", "valid.txt" (the dev books) or "test.txt".
const char* english_text_file(Split split);

// Builds a language model's corpus from the English module alone (options.spanish_module is
// not used): every verse cleaned as for the translation corpus (clean_english), one a line, in
// canonical order, written to OUT/train.txt, valid.txt and test.txt, split by whole books as
// prepare_bible splits them (valid: Ezekiel and Romans; test: Daniel and Acts), and
// OUT/stats.txt. Errors as prepare_bible's.
EnglishTextStats prepare_english_text(const BibleOptions& options);

}  // namespace qkgrad::corpora

