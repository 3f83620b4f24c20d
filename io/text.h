// Text: UTF-8 (the one place that decodes and encodes it: the corpus reader, the BLEU/chrF
// scorers, the Bible text cleaner and the SVG writer all use these), the one whitespace
// normaliser (normalize_spaces: the corpus reader and the Bible cleaner) and joining strings.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace qkgrad {

inline unsigned char byte_at(std::string_view text, std::size_t i) {
  return static_cast<unsigned char>(text[i]);
}

inline bool is_continuation_byte(unsigned char b) { return (b & 0xC0) == 0x80; }

// What a lead byte promises: the character's length in bytes (0: the byte never starts one: a
// continuation byte, or C0, C1, F5..FF) and the range of its second byte, which depends on the
// first (no overlong forms, no UTF-16 surrogates, nothing above U+10FFFF, as in Python's strict
// decoder).
struct Utf8Lead {
  std::size_t length = 0;
  unsigned char second_lo = 0x80, second_hi = 0xBF;
};
inline Utf8Lead utf8_lead(unsigned char lead) {
  Utf8Lead l;
  if (lead < 0x80) {
    l.length = 1;
  } else if (lead >= 0xC2 && lead <= 0xDF) {
    l.length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    l.length = 3;
    if (lead == 0xE0) l.second_lo = 0xA0;  // no overlong 3-byte forms
    if (lead == 0xED) l.second_hi = 0x9F;  // no surrogates U+D800..U+DFFF
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    l.length = 4;
    if (lead == 0xF0) l.second_lo = 0x90;  // no overlong 4-byte forms
    if (lead == 0xF4) l.second_hi = 0x8F;  // nothing above U+10FFFF
  }
  return l;
}

// True when `bytes` (one to four) are the first bytes, or all, of a well-formed character.
inline bool is_utf8_char_prefix(std::string_view bytes) {
  if (bytes.empty()) return false;
  const Utf8Lead l = utf8_lead(byte_at(bytes, 0));
  if (l.length == 0 || bytes.size() > l.length) return false;
  if (bytes.size() >= 2 && (byte_at(bytes, 1) < l.second_lo || byte_at(bytes, 1) > l.second_hi)) return false;
  for (std::size_t k = 2; k < bytes.size(); ++k) {
    if (!is_continuation_byte(byte_at(bytes, k))) return false;
  }
  return true;
}

// Length in bytes of the well-formed UTF-8 character starting at text[i], or 0 if the bytes
// there are not one.
inline std::size_t utf8_char_length(std::string_view text, std::size_t i) {
  const std::size_t length = utf8_lead(byte_at(text, i)).length;
  if (length == 0 || i + length > text.size()) return 0;
  return is_utf8_char_prefix(text.substr(i, length)) ? length : 0;
}

// The bytes at the end of `text` that begin a character not yet complete ("" when the text ends
// where a character does): its last lead byte with the continuation bytes after it, when fewer
// than the lead promises.
inline std::string_view utf8_incomplete_tail(std::string_view text) {
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const unsigned char b = byte_at(text, text.size() - back);
    if (is_continuation_byte(b)) continue;
    return utf8_lead(b).length > back ? text.substr(text.size() - back) : std::string_view();
  }
  return {};
}

// Byte offset of the first malformed UTF-8 sequence in `text`, or npos if there is none.
inline std::size_t first_invalid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t length = utf8_char_length(text, i);
    if (length == 0) return i;
    i += length;
  }
  return std::string_view::npos;
}

// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points > U+10FFFF).
inline bool is_valid_utf8(std::string_view text) { return first_invalid_utf8(text) == std::string_view::npos; }

// Decodes the well-formed character at text[i] into `code_point` and returns its length in
// bytes (1 to 4), or 0 when the bytes there are not one (see utf8_char_length).
inline std::size_t decode_utf8(std::string_view text, std::size_t i, char32_t& code_point) {
  const std::size_t length = utf8_char_length(text, i);
  if (length == 0) return 0;
  const unsigned char lead = byte_at(text, i);
  code_point = length == 1 ? lead : lead & (0x7Fu >> length);  // the lead byte's payload bits
  for (std::size_t k = 1; k < length; ++k) code_point = (code_point << 6) | (byte_at(text, i + k) & 0x3Fu);
  return length;
}

// Appends code point `cp` (at most U+10FFFF, not a surrogate) to `out` as UTF-8.
inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Whitespace, as normalize_spaces reads it: every character that a reader sees as a space (or
// as no character at all, between two words), in a corpus line or a Bible verse:
//  - U+0000-U+0020 and U+007F: the ASCII space, tab, LF, VT, FF and CR, and the other C0
//    controls and DEL. The controls have no glyph; where one is left in a line of text (BEL,
//    ESC, the separators U+001C-U+001F, debris of a conversion) it is not part of a word, and
//    reading it as a separator can never glue two words together;
//  - U+0085 (next line), U+00A0 (no-break space), U+1680 (Ogham space mark), U+2000-U+200A
//    (en quad ... hair space), U+2028 (line separator), U+2029 (paragraph separator), U+202F
//    (narrow no-break space), U+205F (medium mathematical space), U+3000 (ideographic space):
//    with tab..CR and the space, these are Unicode's White_Space property (what Python's
//    str.split() splits on, too). SentencePiece's default nmt_nfkc normalisation, which the
//    subword model applies to every line, turns tab, LF, FF, CR and all of this list but
//    U+0085 into U+0020 as well (NFKC the no-break and typographic spaces, its own rules the
//    others), so keeping them would only hide a word boundary from this code, not from the
//    model.
// Not whitespace: the zero-width characters (U+200B zero-width space, U+200C/U+200D joiners,
// U+2060 word joiner, U+FEFF, U+00AD soft hyphen). They sit inside words (the joiners shape
// Arabic and Indic scripts, the soft hyphen marks a break point) and separate nothing that a
// reader sees; the corpus reader keeps them, and removing them is a separate step of the Bible
// cleaner (corpora/bible_text.cpp). U+180E (Mongolian vowel separator) left White_Space in
// Unicode 6.3 and is not in the set either.
inline bool is_python_space(char32_t cp);
inline bool is_whitespace(char32_t cp) { return cp <= 0x20 || cp == 0x7F || is_python_space(cp); }

// What Python's str.isspace() (and so str.split(), which sacreBLEU tokenises with) calls
// whitespace: tab, LF, VT, FF, CR, the separators U+001C-U+001F, the space, and the non-ASCII
// characters of is_whitespace above. translation/bleu.cpp splits on exactly this set.
inline bool is_python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

// `text` with every run of whitespace (is_whitespace) replaced by one ASCII space, and none at
// either end. Everything else is copied byte for byte: other characters, and bytes that are not
// well-formed UTF-8 (one at a time, so a bad byte never takes the bytes after it along; the
// corpus reader rejects such lines before this, the Bible cleaner reports them later).
inline std::string normalize_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool pending_space = false;
  std::size_t size = 1;
  for (std::size_t pos = 0; pos < text.size(); pos += size) {
    char32_t cp = 0;
    size = decode_utf8(text, pos, cp);
    if (size == 0) {
      size = 1;  // not a well-formed character: copy this byte as it is
    } else if (is_whitespace(cp)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out.append(text.substr(pos, size));
  }
  return out;
}

// One number in a printf format ("%.3f", "%.2e"): the progress lines' and messages' numbers.
inline std::string format_number(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

// The parts with `separator` between them, like Python's separator.join(parts). Parts may be
// anything a std::string can be appended with (std::string, std::string_view, const char*).
template <typename Part>
std::string join(const std::vector<Part>& parts, const std::string& separator) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += separator;
    out += parts[i];
  }
  return out;
}

}  // namespace qkgrad
