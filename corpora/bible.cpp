// The Bible corpus: parsing diatheke's output, cleaning the verses of each module (with
// bible_text.h), aligning the Spanish and English Bibles by reference, splitting by whole
// books, and running diatheke (with process.h) and writing the files. See bible.h for the
// pipeline and docs/bible-corpus.md for why each rule is what it is.
#include "corpora/bible.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string_view>
#include <tuple>

#include "core/error.h"
#include "corpora/process.h"
#include "corpora/scan.h"
#include "io/atomic_file.h"
#include "io/text.h"

namespace qkgrad::corpora {

using scan::is_digit;
using scan::is_space;
using scan::read_number;
using scan::trim;

// =========================================================================================
// Books and the split
// =========================================================================================

const char* split_name(Split split) {
  switch (split) {
    case Split::train: return "train";
    case Split::dev: return "dev";
    case Split::test: return "test";
  }
  return "?";
}

const std::vector<std::string>& bible_books() {
  static const std::vector<std::string> books = {
      // Old Testament (39)
      "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
      "I Samuel", "II Samuel", "I Kings", "II Kings", "I Chronicles", "II Chronicles", "Ezra",
      "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon",
      "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos", "Obadiah",
      "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah", "Malachi",
      // New Testament (27)
      "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "I Corinthians", "II Corinthians",
      "Galatians", "Ephesians", "Philippians", "Colossians", "I Thessalonians", "II Thessalonians",
      "I Timothy", "II Timothy", "Titus", "Philemon", "Hebrews", "James", "I Peter", "II Peter",
      "I John", "II John", "III John", "Jude", "Revelation of John"};
  return books;
}

int book_index(const std::string& book) {
  const auto& books = bible_books();
  const auto it = std::find(books.begin(), books.end(), book);
  return it == books.end() ? -1 : static_cast<int>(it - books.begin());
}

Split split_of_book(const std::string& book) {
  QKGRAD_CHECK(book_index(book) >= 0, "split_of_book: '", book,
               "' is not one of the 66 book names of bible_books() (diatheke's English names, "
               "e.g. \"I Samuel\", \"Revelation of John\")");
  // Held-out books without heavy parallels elsewhere in the Bible (docs/bible-corpus.md).
  if (book == "Ezekiel" || book == "Romans") return Split::dev;
  if (book == "Daniel" || book == "Acts") return Split::test;
  return Split::train;
}

// =========================================================================================
// Parsing diatheke's output
// =========================================================================================

std::string to_string(const VerseRef& ref) {
  return cat(ref.book, " ", ref.chapter, ":", ref.verse);
}

namespace {

// Where a verse reference "Book C:V: " was found on a line.
struct KeyMatch {
  std::size_t begin = 0;  // first character of the book name
  std::size_t end = 0;    // first character of the verse's text
  VerseRef ref;
};

// The longest book name that ends just before `number_pos - 1` (the space before the chapter
// number) and starts the line or follows whitespace or a tag's '>'; empty when none does.
std::string book_ending_at(std::string_view line, std::size_t number_pos) {
  const std::string_view before = line.substr(0, number_pos - 1);
  std::string best;
  for (const std::string& name : bible_books()) {
    if (name.size() <= best.size() || before.size() < name.size()) continue;
    if (before.substr(before.size() - name.size()) != name) continue;
    const std::size_t start = before.size() - name.size();
    if (start == 0 || is_space(before[start - 1]) || before[start - 1] == '>') best = name;
  }
  return best;
}

// The first "Book C:V: " on the line whose book is in bible_books() (a reference at the very
// end of the line, "Book C:V:", counts too: an empty verse).
bool find_verse_key(std::string_view line, KeyMatch& match) {
  for (std::size_t pos = 2; pos < line.size(); ++pos) {
    if (!is_digit(line[pos]) || line[pos - 1] != ' ') continue;
    int chapter = 0, verse = 0;
    std::size_t p = read_number(line, pos, chapter);
    if (p == std::string_view::npos || p >= line.size() || line[p] != ':') continue;
    p = read_number(line, p + 1, verse);
    if (p == std::string_view::npos || p >= line.size() || line[p] != ':') continue;
    if (p + 1 < line.size() && line[p + 1] != ' ') continue;
    const std::string book = book_ending_at(line, pos);
    if (book.empty()) continue;
    match.begin = pos - 1 - book.size();
    match.end = std::min(line.size(), p + 2);
    match.ref = VerseRef{book, chapter, verse};
    return true;
  }
  return false;
}

// True for a line that starts (after spaces and tags) like "Tobit 1:1: ", a reference whose
// book find_verse_key does not know.
bool looks_like_unknown_key(std::string_view line) {
  std::size_t pos = 0;
  while (pos < line.size() && (is_space(line[pos]) || line[pos] == '<')) {
    if (line[pos] == '<') {
      const std::size_t close = line.find('>', pos);
      if (close == std::string_view::npos) return false;
      pos = close + 1;
    } else {
      ++pos;
    }
  }
  const std::size_t colon = line.find(": ", pos);
  if (colon == std::string_view::npos || colon - pos > 40) return false;
  const std::string_view head = line.substr(pos, colon - pos);  // "Tobit 1:1"
  const std::size_t space = head.rfind(' ');
  if (space == std::string_view::npos || space == 0) return false;
  const std::string_view number = head.substr(space + 1);
  const std::size_t inner = number.find(':');
  if (inner == std::string_view::npos || inner == 0 || inner + 1 == number.size()) return false;
  return std::all_of(number.begin(), number.end(), [](char c) { return is_digit(c) || c == ':'; });
}

}  // namespace

std::vector<RawVerse> parse_diatheke_output(const std::string& output, const std::string& module) {
  std::vector<RawVerse> verses;
  const std::string module_line = "(" + module + ")";
  std::istringstream lines(output);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string trimmed = trim(line);
    if (trimmed.empty() || trimmed == module_line) continue;
    KeyMatch key;
    if (find_verse_key(line, key)) {
      verses.push_back(RawVerse{key.ref, trim(std::string_view(line).substr(0, key.begin)),
                                line.substr(key.end)});
      continue;
    }
    QKGRAD_CHECK(!looks_like_unknown_key(line), "parse_diatheke_output: line ", number, " of the ",
                 module, " output starts like a verse reference of a book that is not among the ",
                 "66 of bible_books(): '", trimmed.substr(0, 80), "'; query only Genesis-Malachi ",
                 "and Matthew-Revelation of John, with -l en");
    QKGRAD_CHECK(!verses.empty(), "parse_diatheke_output: line ", number, " of the ", module,
                 " output comes before the first verse reference (\"Genesis 1:1: \"): '",
                 trimmed.substr(0, 80), "'; is this diatheke's output of a Bible text?");
    verses.back().text += ' ';
    verses.back().text += line;  // a verse that spans lines (diatheke's plain format)
  }
  return verses;
}

// =========================================================================================
// Cleaning the verses of each module
// =========================================================================================

namespace {

// The 14 epistles whose last verse carries a subscription in the RV1909 (Romans-Hebrews).
bool has_subscription(const std::string& book) {
  const int index = book_index(book);
  return index >= book_index("Romans") && index <= book_index("Hebrews");
}

// Indices of the last non-empty verse of each book with a subscription.
std::set<std::size_t> subscription_verses(const std::vector<Verse>& verses) {
  std::map<std::string, std::size_t> last;
  for (std::size_t i = 0; i < verses.size(); ++i) {
    if (has_subscription(verses[i].ref.book) && !verses[i].text.empty()) {
      last[verses[i].ref.book] = i;
    }
  }
  std::set<std::size_t> indices;
  for (const auto& entry : last) indices.insert(entry.second);
  return indices;
}

// undo_drop_capital on verse 1 of every chapter, with the names the module itself capitalises.
void undo_drop_capitals(std::vector<Verse>& verses) {
  std::vector<std::string> texts;
  texts.reserve(verses.size());
  for (const Verse& v : verses) texts.push_back(v.text);
  const std::set<std::string> names = capitalised_words(texts);
  for (Verse& v : verses) {
    if (v.ref.verse == 1) v.text = undo_drop_capital(v.text, names);
  }
}

}  // namespace

std::vector<Verse> clean_spanish(const std::vector<RawVerse>& raw) {
  std::vector<Verse> verses;
  verses.reserve(raw.size());
  for (const RawVerse& r : raw) verses.push_back(Verse{r.ref, clean_verse(r.text)});
  for (const std::size_t i : subscription_verses(verses)) {
    verses[i].text = strip_subscription(verses[i].text);
  }
  undo_drop_capitals(verses);
  return verses;
}

std::vector<Verse> clean_english(const std::vector<RawVerse>& raw) {
  std::vector<Verse> verses;
  verses.reserve(raw.size());
  for (const RawVerse& r : raw) {
    std::string text = strip_appendix(clean_verse(r.text));
    const std::string heading = r.ref.book == "Psalms" ? clean_verse(r.heading) : "";
    if (!heading.empty()) text = text.empty() ? heading : heading + " " + text;
    verses.push_back(Verse{r.ref, text});
  }
  return verses;  // the WEB has no drop capitals
}

// =========================================================================================
// Aligning the two Bibles
// =========================================================================================

const char* drop_reason_name(DropReason reason) {
  switch (reason) {
    case DropReason::missing_spanish: return "missing in Spanish";
    case DropReason::missing_english: return "missing in English";
    case DropReason::invalid_utf8: return "invalid UTF-8";
    case DropReason::empty_spanish: return "empty Spanish after cleaning";
    case DropReason::empty_english: return "empty English after cleaning";
    case DropReason::chapter_misaligned: return "in a misaligned chapter";
    case DropReason::length_ratio: return "length ratio over 2";
  }
  return "?";
}

double length_ratio(const std::string& a, const std::string& b) {
  const double la = static_cast<double>(utf8_length(a)), lb = static_cast<double>(utf8_length(b));
  QKGRAD_CHECK(la > 0 && lb > 0, "length_ratio: both texts must be non-empty (lengths ", la,
               " and ", lb, ")");
  return std::max(la, lb) / std::min(la, lb);
}

namespace {

using Key = std::tuple<int, int, int>;  // (book index, chapter, verse): sorts canonically

Key key_of(const VerseRef& ref) { return {book_index(ref.book), ref.chapter, ref.verse}; }

// The verses of one module by reference; throws for a reference seen twice.
std::map<Key, const Verse*> index_verses(const std::vector<Verse>& verses, const char* language) {
  std::map<Key, const Verse*> index;
  for (const Verse& v : verses) {
    QKGRAD_CHECK(book_index(v.ref.book) >= 0, "align_verses: the ", language, " verse ",
                 to_string(v.ref), " names a book that is not in bible_books()");
    QKGRAD_CHECK(index.emplace(key_of(v.ref), &v).second, "align_verses: the ", language,
                 " module has ", to_string(v.ref), " twice; is the diatheke output doubled?");
  }
  return index;
}

// The reason to drop a reference before looking at lengths, or -1 to keep it for now.
int early_drop(const Verse* es, const Verse* en) {
  if (es == nullptr) return static_cast<int>(DropReason::missing_spanish);
  if (en == nullptr) return static_cast<int>(DropReason::missing_english);
  if (!is_valid_utf8(es->text) || !is_valid_utf8(en->text)) {
    return static_cast<int>(DropReason::invalid_utf8);
  }
  if (es->text.empty()) return static_cast<int>(DropReason::empty_spanish);
  if (en->text.empty()) return static_cast<int>(DropReason::empty_english);
  return -1;
}

// Mean |ln(spanish length / english length)| over a chapter's pairs.
double chapter_misfit(const std::vector<VersePair>& pairs) {
  double sum = 0;
  for (const VersePair& p : pairs) {
    sum += std::fabs(std::log(static_cast<double>(utf8_length(p.spanish)) /
                              static_cast<double>(utf8_length(p.english))));
  }
  return pairs.empty() ? 0.0 : sum / static_cast<double>(pairs.size());
}

// Applies the chapter rule, then the verse-length rule, to one chapter's candidate pairs.
void add_chapter(std::vector<VersePair>& chapter, Alignment& out) {
  if (chapter.empty()) return;
  if (chapter_misfit(chapter) > kMaxChapterMisfit) {
    out.dropped[static_cast<std::size_t>(DropReason::chapter_misaligned)] += chapter.size();
    out.misaligned_chapters.push_back(cat(chapter[0].ref.book, " ", chapter[0].ref.chapter));
  } else {
    for (VersePair& p : chapter) {
      if (length_ratio(p.spanish, p.english) > kMaxLengthRatio) {
        ++out.dropped[static_cast<std::size_t>(DropReason::length_ratio)];
      } else {
        out.pairs.push_back(std::move(p));
      }
    }
  }
  chapter.clear();
}

}  // namespace

Alignment align_verses(const std::vector<Verse>& spanish, const std::vector<Verse>& english) {
  const std::map<Key, const Verse*> es = index_verses(spanish, "Spanish");
  const std::map<Key, const Verse*> en = index_verses(english, "English");
  std::set<Key> keys;
  for (const auto& entry : es) keys.insert(entry.first);
  for (const auto& entry : en) keys.insert(entry.first);

  Alignment out;
  std::vector<VersePair> chapter;  // candidate pairs of the chapter being read
  for (const Key& key : keys) {
    const auto s = es.find(key), e = en.find(key);
    const Verse* sv = s == es.end() ? nullptr : s->second;
    const Verse* ev = e == en.end() ? nullptr : e->second;
    const VerseRef& ref = sv != nullptr ? sv->ref : ev->ref;
    if (!chapter.empty() &&
        (chapter[0].ref.book != ref.book || chapter[0].ref.chapter != ref.chapter)) {
      add_chapter(chapter, out);
    }
    const int reason = early_drop(sv, ev);
    if (reason >= 0) {
      ++out.dropped[static_cast<std::size_t>(reason)];
    } else {
      chapter.push_back(VersePair{ref, sv->text, ev->text});
    }
  }
  add_chapter(chapter, out);
  return out;
}

// =========================================================================================
// Running diatheke and writing the files
// =========================================================================================

namespace {

constexpr const char* kAptAll = "sudo apt-get install diatheke sword-text-sparv sword-text-web";

// The Debian package of a module we know, for the error message.
std::string install_hint(const std::string& module) {
  if (module == "spaRV1909eb") return "sudo apt-get install sword-text-sparv";
  if (module == "engWEB2015eb") return "sudo apt-get install sword-text-web";
  return cat("install the SWORD module '", module, "' (e.g. with the SWORD installmgr), or use ",
             "the defaults spaRV1909eb (apt-get install sword-text-sparv) and engWEB2015eb ",
             "(apt-get install sword-text-web)");
}

// Runs diatheke with `args`; throws when it cannot be started or fails.
std::string run_diatheke(const BibleOptions& options, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {options.diatheke};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProgramResult r = run_program(argv, options.timeout_seconds, "prepare_bible");
  QKGRAD_CHECK(r.spawn_error != ENOENT, "prepare_bible: the program '", options.diatheke,
               "' was not found", options.diatheke.find('/') == std::string::npos ? " on PATH" : "",
               "; install diatheke and the two Bibles with: ", kAptAll);
  QKGRAD_CHECK(r.spawn_error == 0, "prepare_bible: cannot start '", options.diatheke,
               "': ", std::strerror(r.spawn_error), "; check that it is an executable program");
  QKGRAD_CHECK(r.exit_status == 0, "prepare_bible: ", describe_command(argv),
               " failed with exit status ", r.exit_status, ": ", trim(r.err).substr(0, 300),
               "; run it by hand to see why (are the SWORD modules installed? ", kAptAll, ")");
  return r.out;
}

// Checks that the modules are installed, with a message that names the packages if not.
void check_modules(const BibleOptions& options, const std::vector<const std::string*>& modules) {
  const std::string list = run_diatheke(options, {"-b", "system", "-k", "modulelistnames"});
  std::set<std::string> installed;
  std::istringstream lines(list);
  for (std::string line; std::getline(lines, line);) installed.insert(trim(line));
  for (const std::string* module : modules) {
    std::string have;
    for (const std::string& m : installed) have += (have.empty() ? "" : ", ") + m;
    QKGRAD_CHECK(installed.count(*module) > 0, "prepare_bible: the SWORD module '", *module,
                 "' is not installed (diatheke lists: ", have.empty() ? "none" : have,
                 "); install it with: ", install_hint(*module));
  }
}

// "4.8 (SWORD: 1.9.0)" from diatheke's usage banner (it prints it, and exits 1, without
// arguments); "unknown" when there is no banner.
std::string diatheke_version(const BibleOptions& options) {
  const ProgramResult r = run_program({options.diatheke}, options.timeout_seconds, "prepare_bible");
  const std::string text = r.err + r.out;
  const std::size_t pos = text.find("Version ");
  if (pos == std::string::npos) return "unknown";
  const std::size_t end = text.find('\n', pos);
  return trim(text.substr(pos + 8, end == std::string::npos ? std::string::npos : end - pos - 8));
}

// The directories where SWORD looks for module .conf files.
std::vector<std::filesystem::path> sword_conf_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* path = std::getenv("SWORD_PATH")) {
    dirs.emplace_back(std::filesystem::path(path) / "mods.d");
  }
  if (const char* home = std::getenv("HOME")) {
    dirs.emplace_back(std::filesystem::path(home) / ".sword" / "mods.d");
  }
  dirs.emplace_back("/usr/share/sword/mods.d");
  dirs.emplace_back("/usr/local/share/sword/mods.d");
  return dirs;
}

std::string lower_ascii(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The value of `key=` in a .conf text, or empty.
std::string conf_value(const std::string& conf, const std::string& key) {
  std::istringstream lines(conf);
  for (std::string line; std::getline(lines, line);) {
    if (line.compare(0, key.size() + 1, key + "=") == 0) return trim(line.substr(key.size() + 1));
  }
  return "";
}

// "Reina Valera 1909, version 2.60 of 2022-12-23" from the module's .conf file (its
// "Description=", "Version=" and "SwordVersionDate=" lines).
std::string module_version(const std::string& module) {
  for (const auto& dir : sword_conf_dirs()) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (lower_ascii(entry.path().filename().string()) != lower_ascii(module) + ".conf") continue;
      const std::string conf = read_file(entry.path().string(), 1 << 20);
      const std::string version = conf_value(conf, "Version");
      const std::string date = conf_value(conf, "SwordVersionDate");
      return cat(conf_value(conf, "Description"), ", version ", version.empty() ? "?" : version,
                 date.empty() ? "" : " of " + date);
    }
  }
  return "version unknown (no " + module + ".conf found in the SWORD directories)";
}

// diatheke's OSIS output of a module (both testaments), parsed. OSIS keeps every verse on one
// line with its heading in front and its footnotes marked; -o fh turns footnotes and headings
// on (without h the WEB repeats a Psalm's title before every verse), -l en fixes the names.
std::vector<RawVerse> read_module(const BibleOptions& options, const std::string& module) {
  const auto& books = bible_books();
  std::vector<RawVerse> verses;
  for (const std::string& range : {books[0] + "-" + books[38], books[39] + "-" + books.back()}) {
    const std::string output =
        run_diatheke(options, {"-b", module, "-f", "OSIS", "-o", "fh", "-l", "en", "-k", range});
    std::vector<RawVerse> part = parse_diatheke_output(output, module);
    QKGRAD_CHECK(!part.empty(), "prepare_bible: diatheke printed no verses of ", range, " for ",
                 module, " (its output starts: '", output.substr(0, 200),
                 "'); is it a Bible module?");
    verses.insert(verses.end(), std::make_move_iterator(part.begin()),
                  std::make_move_iterator(part.end()));
  }
  return verses;
}

// Writes `lines` to `path` atomically, one per line.
void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  write_file_atomically(path, [&](std::FILE* f) {
    for (const std::string& line : lines) {
      std::fwrite(line.data(), 1, line.size(), f);
      std::fputc('\n', f);
    }
  });
}

// Creates the output directory (and its parents) when missing.
void make_out_dir(const std::string& dir) {
  QKGRAD_CHECK(!dir.empty(), "prepare_bible: options.out_dir is empty; give the directory to ",
               "write train/dev/test .es/.en and stats.txt to");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  QKGRAD_CHECK(!ec && std::filesystem::is_directory(dir, ec),
               "prepare_bible: cannot create the output directory '", dir, "': ",
               ec ? ec.message() : "a file of that name exists",
               "; choose another out_dir or fix its permissions");
}

// Writes the six corpus files: for each split, its pairs in canonical order.
void write_splits(const std::string& dir, const std::vector<VersePair>& pairs, BibleStats& stats) {
  std::array<std::vector<std::string>, kSplits> es, en;
  for (const VersePair& p : pairs) {
    const auto s = static_cast<std::size_t>(split_of_book(p.ref.book));
    es[s].push_back(p.spanish);
    en[s].push_back(p.english);
  }
  for (std::size_t s = 0; s < kSplits; ++s) {
    const std::string base = dir + "/" + split_name(static_cast<Split>(s));
    write_lines(base + ".es", es[s]);
    write_lines(base + ".en", en[s]);
    stats.verses[s] = es[s].size();
  }
}

}  // namespace

// =========================================================================================
// The whole pipeline
// =========================================================================================

std::size_t BibleStats::total_verses() const { return verses[0] + verses[1] + verses[2]; }

std::size_t BibleStats::total_dropped() const {
  std::size_t total = 0;
  for (const std::size_t d : dropped) total += d;
  return total;
}

std::string BibleStats::summary() const {
  std::ostringstream s;
  s << "Spanish -> English Bible corpus (qkgrad corpora/bible.cpp)\n"
    << "spanish module: " << spanish_module << " (" << spanish_version << ")\n"
    << "english module: " << english_module << " (" << english_version << ")\n"
    << "diatheke: " << diatheke_version << "\n\n"
    << "verse pairs: " << total_verses() << "\n";
  for (std::size_t i = 0; i < kSplits; ++i) {
    s << "  " << split_name(static_cast<Split>(i)) << ": " << verses[i] << "\n";
  }
  s << "dropped verses: " << total_dropped() << "\n";
  for (std::size_t i = 0; i < kDropReasons; ++i) {
    s << "  " << drop_reason_name(static_cast<DropReason>(i)) << ": " << dropped[i] << "\n";
  }
  s << "misaligned chapters dropped whole (" << misaligned_chapters.size()
    << "): " << join(misaligned_chapters, ", ") << "\n\nbooks:\n";
  for (std::size_t i = 0; i < kSplits; ++i) {
    s << "  " << split_name(static_cast<Split>(i)) << " (" << books[i].size()
      << "): " << join(books[i], ", ") << "\n";
  }
  return s.str();
}

BibleStats prepare_bible(const BibleOptions& options) {
  make_out_dir(options.out_dir);
  check_modules(options, {&options.spanish_module, &options.english_module});
  BibleStats stats;
  stats.spanish_module = options.spanish_module;
  stats.english_module = options.english_module;
  stats.diatheke_version = diatheke_version(options);
  stats.spanish_version = module_version(options.spanish_module);
  stats.english_version = module_version(options.english_module);

  const std::vector<Verse> spanish = clean_spanish(read_module(options, options.spanish_module));
  const std::vector<Verse> english = clean_english(read_module(options, options.english_module));
  const Alignment alignment = align_verses(spanish, english);
  stats.dropped = alignment.dropped;
  stats.misaligned_chapters = alignment.misaligned_chapters;
  for (const std::string& book : bible_books()) {
    stats.books[static_cast<std::size_t>(split_of_book(book))].push_back(book);
  }

  write_splits(options.out_dir, alignment.pairs, stats);
  const std::string summary = stats.summary();
  write_file_atomically(options.out_dir + "/stats.txt",
                        [&](std::FILE* f) { std::fputs(summary.c_str(), f); });
  return stats;
}

// =========================================================================================
// The English text (qkgrad-lm's default corpus)
// =========================================================================================

std::string EnglishTextStats::summary() const {
  std::ostringstream s;
  s << "English Bible text (qkgrad corpora/bible.cpp, prepare_english_text)\n"
    << "module: " << english_module << " (" << english_version << ")\n"
    << "diatheke: " << diatheke_version << "\n\n"
    << "verses (one a line) and bytes:\n";
  for (std::size_t i = 0; i < kSplits; ++i) {
    s << "  " << english_text_file(static_cast<Split>(i)) << ": " << verses[i] << " verses, " << bytes[i] << " bytes\n";
  }
  s << "verses dropped (empty after cleaning, or not UTF-8): " << dropped << "\n";
  return s.str();
}

const char* english_text_file(Split split) {
  switch (split) {
    case Split::train: return "train.txt";
    case Split::dev: return "valid.txt";
    case Split::test: return "test.txt";
  }
  return "?";
}

EnglishTextStats prepare_english_text(const BibleOptions& options) {
  make_out_dir(options.out_dir);
  check_modules(options, {&options.english_module});
  EnglishTextStats stats;
  stats.english_module = options.english_module;
  stats.diatheke_version = diatheke_version(options);
  stats.english_version = module_version(options.english_module);
  std::array<std::vector<std::string>, kSplits> lines;
  for (const Verse& v : clean_english(read_module(options, options.english_module))) {
    if (v.text.empty() || !is_valid_utf8(v.text)) {
      ++stats.dropped;
      continue;
    }
    const auto split = static_cast<std::size_t>(split_of_book(v.ref.book));
    lines[split].push_back(v.text);
    stats.verses[split] += 1;
    stats.bytes[split] += v.text.size() + 1;
  }
  for (std::size_t s = 0; s < kSplits; ++s) {
    write_lines(options.out_dir + "/" + english_text_file(static_cast<Split>(s)), lines[s]);
  }
  const std::string summary = stats.summary();
  write_file_atomically(options.out_dir + "/stats.txt", [&](std::FILE* f) { std::fputs(summary.c_str(), f); });
  return stats;
}

}  // namespace qkgrad::corpora
