// Cleaning the text of one verse: OSIS markup, footnotes, Strong's numbers, entities, labels,
// zero-width characters and whitespace (clean_verse), and the module-specific fixes of the
// RV1909 and the WEB. See bible_text.h, and docs/bible-corpus.md for why each rule is what it is.
#include "corpora/bible_text.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <unordered_map>

#include "corpora/scan.h"
#include "io/text.h"

namespace qkgrad::corpora {

using scan::is_digit;
using scan::read_number;
using scan::trim;

// =========================================================================================
// Characters: UTF-8 and letter case
// =========================================================================================

namespace {

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

// Invisible characters that join rather than separate: U+00AD (soft hyphen), U+200B-U+200F
// (zero-width space, joiners, direction marks), U+2060 (word joiner), U+FEFF (byte order mark).
bool is_zero_width(long cp) {
  return cp == 0xAD || (cp >= 0x200B && cp <= 0x200F) || cp == 0x2060 || cp == 0xFEFF;
}

}  // namespace

std::string remove_zero_width(std::string_view text) {
  std::string out;
  for (std::size_t pos = 0, size = 1; pos < text.size(); pos += size) {
    if (!is_zero_width(code_point_at(text, pos, size))) out.append(text.substr(pos, size));
  }
  return out;
}

std::string clean_verse(const std::string& raw) {
  std::string text = mark_notes(raw);
  text = remove_tags(text);
  text = decode_entities(text);
  text = mark_plain_notes(text);
  text = remove_inline_labels(text);
  text = resolve_note_marks(text);
  // Zero-width characters first: "a \u200B b" is "a b", not "a  b".
  return normalize_spaces(remove_zero_width(text));
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

}  // namespace qkgrad::corpora
