// The Bible corpus: running diatheke, parsing and cleaning its verses, aligning the Spanish and
// English Bibles by reference, splitting by whole books and writing the files. See bible.h for
// the pipeline and docs/bible-corpus.md for why each rule is what it is.
#include "corpora/bible.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/text.h"

namespace qkgrad::corpora {

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
// Text helpers: characters, UTF-8 and letter case
// =========================================================================================

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

std::string trim(std::string_view s) {
  std::size_t begin = 0, end = s.size();
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return std::string(s.substr(begin, end - begin));
}

// The code point at text[pos] and its length in `size`; -1 (and size 1) for a byte that does not
// start a well-formed character (io/text.h decodes).
long code_point_at(std::string_view text, std::size_t pos, std::size_t& size) {
  char32_t cp = 0;
  size = decode_utf8(text, pos, cp);
  if (size == 0) {
    size = 1;
    return -1;
  }
  return static_cast<long>(cp);
}

// Letter case for ASCII and Latin-1 (all that Spanish and English need): U+00C0-U+00DE are the
// capitals of U+00E0-U+00FE, except U+00D7 (×) and U+00F7 (÷).
bool is_upper(long cp) {
  return (cp >= 'A' && cp <= 'Z') || (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7);
}
bool is_lower(long cp) {
  return (cp >= 'a' && cp <= 'z') || (cp >= 0xDF && cp <= 0xFF && cp != 0xF7);
}
long to_lower(long cp) { return is_upper(cp) ? cp + 0x20 : cp; }
long to_upper(long cp) { return is_lower(cp) && cp != 0xDF && cp != 0xFF ? cp - 0x20 : cp; }

// True for a letter (ASCII or Latin-1) or a digit.
bool is_letter_or_digit(long cp) {
  return is_upper(cp) || is_lower(cp) || (cp >= '0' && cp <= '9');
}

}  // namespace

// =========================================================================================
// Parsing diatheke's output
// =========================================================================================

std::string to_string(const VerseRef& ref) {
  return cat(ref.book, " ", ref.chapter, ":", ref.verse);
}

namespace {

// Reads the digits at line[pos...] into `number` (at most 4 digits); returns the position after
// them, or npos when there are none.
std::size_t read_number(std::string_view line, std::size_t pos, int& number) {
  std::size_t end = pos;
  number = 0;
  while (end < line.size() && is_digit(line[end]) && end - pos < 4) {
    number = number * 10 + (line[end] - '0');
    ++end;
  }
  return end == pos ? std::string_view::npos : end;
}

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
// Cleaning one verse
// =========================================================================================

namespace {

// Stands for a removed footnote until we know whether a space belongs there.
constexpr char kNoteMark = '\x1F';

// Tags that sit inside a word or around words without separating them: removing them leaves
// nothing behind. Any other tag (milestone, l, div, lb, title, ...) separates: a space.
bool is_inline_tag(std::string_view name) {
  static const char* const names[] = {"w",       "hi",   "transChange", "divineName", "seg",
                                      "foreign", "name", "rdg",         "abbr",       "q"};
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

// The element name of the tag starting at text[pos] == '<' ("note" for "</note>").
std::string_view tag_name(std::string_view text, std::size_t pos) {
  std::size_t begin = pos + 1;
  if (begin < text.size() && text[begin] == '/') ++begin;
  std::size_t end = begin;
  while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) != 0)) ++end;
  return text.substr(begin, end - begin);
}

// Replaces every <note ...>...</note> (and <note .../>) by kNoteMark.
std::string mark_notes(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const std::size_t open = text.find("<note", pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      return out;
    }
    if (tag_name(text, open) != "note") {  // "<notes>": not a footnote, keep it
      out.append(text.substr(pos, open + 1 - pos));
      pos = open + 1;
      continue;
    }
    out.append(text.substr(pos, open - pos));
    out += kNoteMark;
    const std::size_t open_end = text.find('>', open);
    if (open_end == std::string_view::npos) return out;  // a cut-off tag: drop the rest
    if (text[open_end - 1] == '/') {
      pos = open_end + 1;  // <note .../>
    } else {
      const std::size_t close = text.find("</note>", open_end);
      if (close == std::string_view::npos) return out;  // never closed: drop the rest
      pos = close + std::string_view("</note>").size();
    }
  }
}

// Replaces plain format's footnotes "[1:1 The Hebrew word ...]" by kNoteMark.
std::string mark_plain_notes(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t open = text.find('[', pos);
    if (open == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    out.append(text.substr(pos, open - pos));
    int chapter = 0, verse = 0;
    std::size_t p = read_number(text, open + 1, chapter);
    bool is_note = p != std::string_view::npos && p < text.size() && text[p] == ':';
    if (is_note) p = read_number(text, p + 1, verse);
    is_note = is_note && p != std::string_view::npos && p < text.size() && text[p] == ' ';
    const std::size_t close = text.find(']', open);
    if (is_note && close != std::string_view::npos) {
      out += kNoteMark;
      pos = close + 1;
    } else {
      out += '[';
      pos = open + 1;
    }
  }
  return out;
}

// True for "<G5547>" / "<H0430>": a Strong's number as diatheke's plain format prints it.
bool is_strongs_tag(std::string_view tag) {
  if (tag.size() < 4 || (tag[1] != 'G' && tag[1] != 'H') || tag.back() != '>') return false;
  return std::all_of(tag.begin() + 2, tag.end() - 1, is_digit);
}

// The last code point of `text`, or -1 when it is empty or ends in a broken sequence.
long last_code_point(const std::string& text) {
  std::size_t start = text.size();
  while (start > 0 && (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80) --start;
  if (start == 0) return -1;
  std::size_t size = 1;
  const long cp = code_point_at(text, start - 1, size);
  return start - 1 + size == text.size() ? cp : -1;
}

// True when `text` starts with a letter or a digit.
bool starts_with_letter(std::string_view text) {
  std::size_t size = 1;
  return !text.empty() && is_letter_or_digit(code_point_at(text, 0, size));
}

// The last word of `text`, in lower case ASCII ("Dad" -> "dad").
std::string last_word(const std::string& text) {
  const std::size_t space = text.find_last_of(' ');
  std::string word = text.substr(space == std::string::npos ? 0 : space + 1);
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

// Spanish enclitic pronouns: true when `rest`, the text after a "</w>", is one or two of
// me, te, se, nos, os, lo, la, los, las, le, les that end the word ("haz</w>la." is "hazla.",
// "Júrame</w>lo en" is "Júramelo en"), and the word before is not a function word ("de</w>la
// casa" is "de la casa"). A pronoun followed by another <w> starts a new word ("lo<w>oyeron").
bool continues_with_enclitic(std::string_view rest, const std::string& previous_word) {
  static const std::set<std::string> function_words = {
      "y",   "e",   "de", "que", "como", "cual", "no", "ni", "o",  "u",  "a",   "á",   "en",
      "por", "con", "si", "mas", "del",  "al",   "se", "lo", "la", "le", "les", "los", "las"};
  static const char* const pronouns[] = {"los", "las", "les", "nos", "me", "te",
                                         "se",  "os",  "lo",  "la",  "le"};
  if (function_words.count(previous_word) > 0) return false;
  std::size_t pos = 0;
  for (int count = 0; count < 2 && starts_with_letter(rest.substr(pos)); ++count) {
    const auto* match = std::find_if(std::begin(pronouns), std::end(pronouns), [&](const char* p) {
      return rest.substr(pos).starts_with(p);
    });
    if (match == std::end(pronouns)) return false;
    pos += std::strlen(*match);
  }
  return pos > 0 && !starts_with_letter(rest.substr(pos)) && !rest.substr(pos).starts_with("<w");
}

// What removing an inline tag leaves: nothing, or a space where a <w> element touches a word
// ("<w>Y FUÉ</w>que<w>á los treinta</w>" in the RV1909 is "Y FUÉ que á los treinta"), except
// before an enclitic pronoun.
bool needs_space(const std::string& out, std::string_view tag, std::string_view rest) {
  if (tag.substr(0, 3) != "<w>" && tag.substr(0, 3) != "<w " && tag != "</w>") return false;
  if (!is_letter_or_digit(last_code_point(out)) || !starts_with_letter(rest)) return false;
  return tag != "</w>" || !continues_with_enclitic(rest, last_word(out));
}

// Removes every tag: Strong's numbers (with the space before them) and inline tags leave
// nothing (or the space needs_space asks for), the others a space.
std::string remove_tags(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] != '<') {
      out += text[pos++];
      continue;
    }
    const std::size_t close = text.find('>', pos);
    if (close == std::string_view::npos) break;  // a cut-off tag at the end: drop it
    const std::string_view tag = text.substr(pos, close + 1 - pos);
    if (is_strongs_tag(tag)) {
      while (!out.empty() && out.back() == ' ') out.pop_back();
    } else if (!is_inline_tag(tag_name(text, pos)) ||
               needs_space(out, tag, text.substr(close + 1))) {
      out += ' ';
    }
    pos = close + 1;
  }
  return out;
}

// The text of an entity's name ("amp", "#233", "#xE9"), or empty for an unknown one.
std::string decode_entity(std::string_view name) {
  if (name == "amp") return "&";
  if (name == "lt") return "<";
  if (name == "gt") return ">";
  if (name == "quot") return "\"";
  if (name == "apos") return "'";
  if (name.size() < 2 || name[0] != '#') return "";
  const bool hex = name[1] == 'x' || name[1] == 'X';
  const std::string digits(name.substr(hex ? 2 : 1));
  if (digits.empty() || digits.size() > 6) return "";
  char* end = nullptr;
  const unsigned long cp = std::strtoul(digits.c_str(), &end, hex ? 16 : 10);
  if (*end != '\0' || cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return "";
  std::string out;
  append_utf8(out, static_cast<char32_t>(cp));
  return out;
}

// Decodes "&amp;", "&#233;", ...; anything else with '&' is kept as it is.
std::string decode_entities(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t amp = text.find('&', pos);
    if (amp == std::string_view::npos) {
      out.append(text.substr(pos));
      break;
    }
    out.append(text.substr(pos, amp - pos));
    const std::size_t semi = text.find(';', amp);
    const std::string decoded = semi == std::string_view::npos || semi - amp > 10
                                    ? ""
                                    : decode_entity(text.substr(amp + 1, semi - amp - 1));
    if (decoded.empty()) {
      out += '&';
      pos = amp + 1;
    } else {
      out += decoded;
      pos = semi + 1;
    }
  }
  return out;
}

// Removes a single capitalised word standing alone between two runs of 3+ spaces: a speaker
// label that the WEB prints inside a verse (Song of Solomon 8:5 "...?    Beloved   Under ...").
std::string remove_inline_labels(const std::string& text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t gap = text.find("   ", pos);
    if (gap == std::string::npos) {
      out.append(text, pos, std::string::npos);
      break;
    }
    std::size_t word = gap;
    while (word < text.size() && text[word] == ' ') ++word;
    std::size_t word_end = word;
    while (word_end < text.size() && std::isalpha(static_cast<unsigned char>(text[word_end])) != 0)
      ++word_end;
    const bool label = word_end - word >= 2 &&
                       std::isupper(static_cast<unsigned char>(text[word])) != 0 &&
                       text.compare(word_end, 3, "   ") == 0;
    out.append(text, pos, word - pos);
    pos = label ? word_end : word;
  }
  return out;
}

// Decides what each footnote mark becomes: nothing before closing punctuation or a space
// ("Son,<note/> lest", "God.”<note/>"), a space otherwise ("God<note/>created").
std::string resolve_note_marks(const std::string& text) {
  static const std::string_view closers[] = {",", ".", ";", ":", "!", "?", ")", "]", "”", "’"};
  std::string out;
  for (std::size_t pos = 0; pos < text.size(); ++pos) {
    if (text[pos] != kNoteMark) {
      out += text[pos];
      continue;
    }
    std::size_t next = pos + 1;
    while (next < text.size() && (text[next] == kNoteMark || text[next] == ' ')) ++next;
    const std::string_view rest = std::string_view(text).substr(next);
    const bool before_closer =
        std::any_of(std::begin(closers), std::end(closers),
                    [&](std::string_view c) { return rest.substr(0, c.size()) == c; });
    if (before_closer) {
      pos = next - 1;  // also drop the spaces between the mark and the punctuation
    } else {
      out += ' ';
    }
  }
  return out;
}

// Whitespace: ASCII spaces and control characters, U+00A0 (no-break space), U+2000-U+200A,
// U+2028, U+2029, U+202F, U+205F and U+3000.
bool is_blank(long cp) {
  return (cp >= 0 && cp <= 0x20) || cp == 0x7F || cp == 0xA0 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// Invisible characters that join rather than separate: U+00AD (soft hyphen), U+200B-U+200F
// (zero-width space, joiners, direction marks), U+2060 (word joiner), U+FEFF (byte order mark).
bool is_zero_width(long cp) {
  return cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) || cp == 0x2060 || cp == 0xFEFF;
}

// One space for every run of whitespace, no space at the ends, no zero-width characters.
// Bytes that are not valid UTF-8 are copied as they are.
std::string normalise_spaces(const std::string& text) {
  std::string out;
  bool pending_space = false;
  for (std::size_t pos = 0, size = 1; pos < text.size(); pos += size) {
    const long cp = code_point_at(text, pos, size);
    if (is_zero_width(cp)) continue;
    if (is_blank(cp)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out.append(text, pos, size);
  }
  return out;
}

}  // namespace

std::string clean_verse(const std::string& raw) {
  std::string text = mark_notes(raw);
  text = remove_tags(text);
  text = decode_entities(text);
  text = mark_plain_notes(text);
  text = remove_inline_labels(text);
  text = resolve_note_marks(text);
  return normalise_spaces(text);
}

// =========================================================================================
// Letter case, UTF-8 checks and the module-specific fixes
// =========================================================================================

namespace {

struct WordShape {
  std::size_t letters = 0;
  std::size_t upper = 0;
};

// How many letters a word has and how many of them are capitals.
WordShape shape_of(std::string_view word) {
  WordShape shape;
  for (std::size_t pos = 0, size = 1; pos < word.size(); pos += size) {
    const long cp = code_point_at(word, pos, size);
    if (is_upper(cp) || is_lower(cp)) ++shape.letters;
    if (is_upper(cp)) ++shape.upper;
  }
  return shape;
}

// The word's first letter as a code point, or -1 when it has none.
long first_letter(std::string_view word) {
  for (std::size_t pos = 0, size = 1; pos < word.size(); pos += size) {
    const long cp = code_point_at(word, pos, size);
    if (is_upper(cp) || is_lower(cp)) return cp;
  }
  return -1;
}

bool all_capitals(std::string_view word) {
  const WordShape s = shape_of(word);
  return s.letters > 0 && s.upper == s.letters;
}

// The word's letters in lower case, without the punctuation around it ("¿CAZARÁS" -> "cazarás").
std::string lower_letters(std::string_view word) {
  std::string out;
  for (std::size_t pos = 0, size = 1; pos < word.size(); pos += size) {
    const long cp = code_point_at(word, pos, size);
    if (is_upper(cp) || is_lower(cp)) append_utf8(out, static_cast<char32_t>(to_lower(cp)));
  }
  return out;
}

// The word in lower case, its first letter a capital when `capital` ("¿CAZARÁS" -> "¿Cazarás").
std::string recase(std::string_view word, bool capital) {
  std::string out;
  bool first = true;
  for (std::size_t pos = 0, size = 1; pos < word.size(); pos += size) {
    const long cp = code_point_at(word, pos, size);
    if (cp < 0) {
      out += word[pos];
      continue;
    }
    const bool letter = is_upper(cp) || is_lower(cp);
    const long mapped = letter && first && capital ? to_upper(cp) : to_lower(cp);
    append_utf8(out, static_cast<char32_t>(mapped));
    if (letter) first = false;
  }
  return out;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::istringstream in(text);
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// True when the word before index i ends a sentence (or there is none).
bool starts_sentence(const std::vector<std::string>& words, std::size_t i) {
  if (i == 0) return true;
  const char last = words[i - 1].back();
  return last == '.' || last == ':' || last == ';' || last == '!' || last == '?';
}

}  // namespace

bool is_valid_utf8(const std::string& text) {
  for (std::size_t pos = 0, size = 1; pos < text.size(); pos += size) {
    if (code_point_at(text, pos, size) < 0) return false;
  }
  return true;
}

std::size_t utf8_length(const std::string& text) {
  return static_cast<std::size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

std::set<std::string> capitalised_words(const std::vector<std::string>& texts) {
  std::unordered_map<std::string, std::array<int, 2>> counts;  // word -> {lower, capital}
  for (const std::string& text : texts) {
    const std::vector<std::string> words = split_words(text);
    for (std::size_t i = 0; i < words.size(); ++i) {
      const WordShape s = shape_of(words[i]);
      if (starts_sentence(words, i) || s.letters < 2 || s.upper == s.letters) continue;
      const bool capital = is_upper(first_letter(words[i]));
      ++counts[lower_letters(words[i])][capital ? 1 : 0];
    }
  }
  std::set<std::string> names;
  for (const auto& [word, count] : counts) {
    if (count[1] > count[0]) names.insert(word);
  }
  return names;
}

std::string undo_drop_capital(const std::string& text, const std::set<std::string>& names) {
  std::vector<std::string> words = split_words(text);
  // The drop capital: the first word of 2+ letters all in capitals, with the one-letter
  // capitals before it ("Y", "A") and the words in capitals after it.
  std::size_t first = 0;
  while (first < words.size() &&
         !(all_capitals(words[first]) && shape_of(words[first]).letters >= 2)) {
    ++first;
  }
  if (first == words.size()) return text;
  std::size_t begin = first, end = first + 1;
  while (begin > 0 && all_capitals(words[begin - 1]) && shape_of(words[begin - 1]).letters == 1) {
    --begin;
  }
  while (end < words.size() && all_capitals(words[end])) ++end;
  for (std::size_t i = begin; i < end; ++i) {
    const bool capital = starts_sentence(words, i) || names.count(lower_letters(words[i])) > 0;
    words[i] = recase(words[i], capital);
  }
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

std::string strip_subscription(const std::string& text) {
  const std::string amen = "Amén.";
  const std::size_t pos = text.rfind(amen);
  if (pos == std::string::npos) return text;
  return text.substr(0, pos + amen.size());
}

std::string strip_appendix(const std::string& text) {
  const std::size_t pos = text.find("World English Bible Glossary");
  if (pos == std::string::npos) return text;
  return trim(std::string_view(text).substr(0, pos));
}

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
// Running diatheke
// =========================================================================================

namespace {

struct ProgramResult {
  int spawn_error = 0;   // errno of a failed start (ENOENT: no such program), 0 when it ran
  int exit_status = 0;   // exit code, or 128 + signal number
  std::string out, err;  // what it wrote to stdout and stderr
};

// Closes a file descriptor when it goes out of scope.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

// Reads what is available on `fd` into `into`; returns false at the end of the stream.
bool drain(int fd, std::string& into) {
  char buffer[65536];
  const ssize_t n = ::read(fd, buffer, sizeof buffer);
  if (n > 0) {
    into.append(buffer, static_cast<std::size_t>(n));
    return true;
  }
  return n < 0 && (errno == EINTR || errno == EAGAIN);
}

// Turns a wait status into an exit code (128 + the signal's number when it was killed).
int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// "`diatheke -b system -k 'Matthew-Revelation of John'`": a command line for messages.
std::string describe(const std::vector<std::string>& argv) {
  std::string text = "`" + argv[0];
  for (std::size_t i = 1; i < argv.size(); ++i) {
    text += argv[i].find(' ') == std::string::npos ? " " + argv[i] : " '" + argv[i] + "'";
  }
  return text + "`";
}

// Kills the child (it has run too long), reaps it and throws `why`.
[[noreturn]] void stop_and_fail(pid_t pid, const std::string& why) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  fail(why);
}

// Starts argv[0] (searched on PATH) with stdin from /dev/null and both outputs on pipes.
pid_t spawn(const std::vector<std::string>& argv, Fd& out, Fd& err, int& spawn_error) {
  int out_pipe[2], err_pipe[2];
  QKGRAD_CHECK(::pipe2(out_pipe, O_CLOEXEC) == 0,
               "run_program: pipe failed: ", std::strerror(errno));
  out.fd = out_pipe[0];
  Fd out_write{out_pipe[1]};
  QKGRAD_CHECK(::pipe2(err_pipe, O_CLOEXEC) == 0,
               "run_program: pipe failed: ", std::strerror(errno));
  err.fd = err_pipe[0];
  Fd err_write{err_pipe[1]};

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_write.fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_write.fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  spawn_error = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  return spawn_error == 0 ? pid : -1;
}

// Runs a program without a shell and collects its output. Kills it and throws when it runs
// longer than `timeout_seconds` (also after closing its outputs) or writes more than 512 MiB.
ProgramResult run_program(const std::vector<std::string>& argv, double timeout_seconds) {
  ProgramResult result;
  Fd out, err;
  const pid_t pid = spawn(argv, out, err, result.spawn_error);
  if (pid < 0) return result;

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeout_seconds));
  const std::string too_long =
      cat("prepare_bible: ", describe(argv), " ran longer than ", timeout_seconds,
          " s and was stopped; run it by hand to see why");
  constexpr std::size_t kMaxOutput = std::size_t{512} << 20;
  while (out.fd >= 0 || err.fd >= 0) {  // read both pipes until the program closes them
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) stop_and_fail(pid, too_long);
    if (result.out.size() + result.err.size() > kMaxOutput) {
      stop_and_fail(
          pid, cat("prepare_bible: ", describe(argv), " wrote more than 512 MiB and was stopped"));
    }
    pollfd fds[2] = {{out.fd, POLLIN, 0}, {err.fd, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), 1000))) < 0 &&
        errno != EINTR) {
      stop_and_fail(pid, cat("prepare_bible: poll failed while reading the output of ",
                             describe(argv), ": ", std::strerror(errno)));
    }
    // A pipe is done when the program closed it (read returns 0) or reading it failed.
    const short ready = POLLIN | POLLHUP | POLLERR;
    if ((fds[0].revents & ready) != 0 && !drain(out.fd, result.out)) out.reset();
    if ((fds[1].revents & ready) != 0 && !drain(err.fd, result.err)) err.reset();
  }
  while (true) {  // wait for it to exit, still within the time limit
    int status = 0;
    const pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      result.exit_status = exit_code(status);
      return result;
    }
    if (done < 0 && errno != EINTR) {
      fail(cat("prepare_bible: waitpid failed for ", describe(argv), ": ", std::strerror(errno)));
    }
    if (Clock::now() >= deadline) stop_and_fail(pid, too_long);
    ::usleep(10000);
  }
}

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
  const ProgramResult r = run_program(argv, options.timeout_seconds);
  QKGRAD_CHECK(r.spawn_error != ENOENT, "prepare_bible: the program '", options.diatheke,
               "' was not found", options.diatheke.find('/') == std::string::npos ? " on PATH" : "",
               "; install diatheke and the two Bibles with: ", kAptAll);
  QKGRAD_CHECK(r.spawn_error == 0, "prepare_bible: cannot start '", options.diatheke,
               "': ", std::strerror(r.spawn_error), "; check that it is an executable program");
  QKGRAD_CHECK(r.exit_status == 0, "prepare_bible: ", describe(argv), " failed with exit status ",
               r.exit_status, ": ", trim(r.err).substr(0, 300),
               "; run it by hand to see why (are the SWORD modules installed? ", kAptAll, ")");
  return r.out;
}

// Checks that both modules are installed, with a message that names the packages if not.
void check_modules(const BibleOptions& options) {
  const std::string list = run_diatheke(options, {"-b", "system", "-k", "modulelistnames"});
  std::set<std::string> installed;
  std::istringstream lines(list);
  for (std::string line; std::getline(lines, line);) installed.insert(trim(line));
  for (const std::string* module : {&options.spanish_module, &options.english_module}) {
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
  const ProgramResult r = run_program({options.diatheke}, options.timeout_seconds);
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
  check_modules(options);
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

}  // namespace qkgrad::corpora
