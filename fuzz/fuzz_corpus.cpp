// libFuzzer target for the corpus reader and cleaner (translation/corpus.h).
//
// The input is cut (FuzzedDataProvider) into a line-length limit, a source text and a target
// text, each read as a file would be. A seed in fuzz/corpus/corpus is laid out as
//   <source text> '\' <any byte but '\'> <target text> <limit byte: the limit is its value % 65>
// (in the source text, a doubled backslash stands for one). What it checks, for any input:
//   - first_invalid_utf8() (io/text.h) agrees with an independent reference decoder (reference_first_invalid below),
//     including the offset of the first bad byte;
//   - normalize_spaces() (io/text.h) turns every run of Unicode whitespace (the list in
//     reference_is_whitespace below: ASCII whitespace and the other C0 controls, DEL, U+0085,
//     U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000) between two other
//     characters into one ' ' and drops the runs at either end: no leading, trailing or doubled
//     space, no other whitespace left, one space per inner run, every other character (zero-
//     width ones included) and every byte that is not well-formed UTF-8 kept in order, and
//     idempotent;
//   - split_text_lines() throws qkgrad::Error exactly when the text has a NUL byte or invalid
//     UTF-8, and otherwise returns lines without '\n' that, put back together, give the text
//     again (a '\r' before each '\n', and at the very end, is dropped: CRLF reads as LF);
//   - make_parallel() either throws qkgrad::Error (different line counts, nothing usable) or
//     returns aligned, normalised, non-empty lines within the limit, and accounts for every
//     line pair as kept or dropped.
// Never a crash, undefined behaviour, leak or an exception other than qkgrad::Error.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "io/text.h"
#include "translation/corpus.h"

using qkgrad::translation::ParallelCorpus;

namespace {

void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz-corpus: invariant violated: %s\n", what);
  std::abort();
}

// The length of the well-formed UTF-8 character at s[i] (its code point in `cp`), or 0 when the
// bytes there are not one. Written independently of io/text.h: decode the code point, then
// reject overlong forms, surrogates and values above U+10FFFF (RFC 3629), as Python's strict
// decoder does.
std::size_t reference_char_length(std::string_view s, std::size_t i, uint32_t& cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = 0;
  if (b < 0x80) {
    n = 1;
    cp = b;
  } else if ((b & 0xE0) == 0xC0) {
    n = 2;
    cp = b & 0x1Fu;
  } else if ((b & 0xF0) == 0xE0) {
    n = 3;
    cp = b & 0x0Fu;
  } else if ((b & 0xF8) == 0xF0) {
    n = 4;
    cp = b & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (c & 0x3Fu);
  }
  const uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < smallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// The offset of the first byte that does not start a well-formed UTF-8 character, or npos.
std::size_t reference_first_invalid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    uint32_t cp = 0;
    const std::size_t n = reference_char_length(s, i, cp);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

// The whitespace that normalize_spaces collapses, listed independently of io/text.h.
bool reference_is_whitespace(uint32_t cp) {
  static const uint32_t singles[] = {0x7F,   0x85,   0xA0,   0x1680, 0x2028,
                                     0x2029, 0x202F, 0x205F, 0x3000};
  if (cp <= 0x20 || (cp >= 0x2000 && cp <= 0x200A)) return true;
  for (const uint32_t single : singles) {
    if (cp == single) return true;
  }
  return false;
}

// `s` cut into pieces as normalize_spaces reads it: each well-formed character, and each byte
// that does not start one, on its own.
struct Piece {
  std::string_view bytes;
  bool space = false;  // a well-formed whitespace character
};

std::vector<Piece> pieces_of(std::string_view s) {
  std::vector<Piece> pieces;
  for (std::size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const std::size_t n = reference_char_length(s, i, cp);
    pieces.push_back(Piece{s.substr(i, n == 0 ? 1 : n), n != 0 && reference_is_whitespace(cp)});
    i += n == 0 ? 1 : n;
  }
  return pieces;
}

// The bytes of everything but whitespace, in order.
std::string without_spaces(std::string_view s) {
  std::string out;
  for (const Piece& piece : pieces_of(s)) {
    if (!piece.space) out += piece.bytes;
  }
  return out;
}

// The number of whitespace runs with something else both before and after them.
std::size_t inner_space_runs(std::string_view s) {
  std::size_t runs = 0;
  bool seen_other = false, in_run = false;
  for (const Piece& piece : pieces_of(s)) {
    if (piece.space) {
      in_run = seen_other;
    } else {
      if (in_run) ++runs;
      in_run = false;
      seen_other = true;
    }
  }
  return runs;
}

void check_valid_utf8(const std::string& text) {
  const std::size_t bad = qkgrad::first_invalid_utf8(text);
  require(bad == reference_first_invalid(text), "first_invalid_utf8 disagrees with the reference");
  require(qkgrad::is_valid_utf8(text) == (bad == std::string_view::npos), "is_valid_utf8 disagrees with first_invalid_utf8");
}

void check_normalize_spaces(const std::string& text) {
  const std::string out = qkgrad::translation::normalize_spaces(text);
  require(out.empty() || (out.front() != ' ' && out.back() != ' '), "leading or trailing space");
  require(out.find("  ") == std::string::npos, "a doubled space");
  for (const Piece& piece : pieces_of(out)) {
    require(!piece.space || piece.bytes == " ", "whitespace other than ' ' left");
  }
  require(without_spaces(out) == without_spaces(text), "non-space characters or bytes changed");
  require(static_cast<std::size_t>(std::count(out.begin(), out.end(), ' ')) ==
              inner_space_runs(text),
          "not one space per run of whitespace between other characters");
  require(qkgrad::translation::normalize_spaces(out) == out, "not idempotent");
}

// split_text_lines on `text`; returns false if it (rightly) threw.
bool check_split(const std::string& text, std::vector<std::string>& lines) {
  const bool bad_input = text.find('\0') != std::string::npos ||
                         reference_first_invalid(text) != std::string_view::npos;
  try {
    lines = qkgrad::translation::split_text_lines(text, "fuzz.txt");
  } catch (const qkgrad::Error&) {
    require(bad_input, "split_text_lines refused a valid text");
    return false;
  }
  require(!bad_input, "split_text_lines accepted a NUL byte or invalid UTF-8");
  // Put the text back together: each line, then an optional '\r', then '\n' or the end.
  std::size_t at = 0;
  for (const std::string& line : lines) {
    require(line.find('\n') == std::string::npos, "a line contains '\\n'");
    require(text.compare(at, line.size(), line) == 0, "a line differs from the text");
    at += line.size();
    if (at < text.size() && text[at] == '\r' && (at + 1 == text.size() || text[at + 1] == '\n')) {
      ++at;
    }
    require(at == text.size() || text[at] == '\n', "a line stops before its end");
    if (at < text.size()) ++at;
  }
  require(at == text.size(), "the lines do not cover the text");
  return true;
}

void check_parallel(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                    std::size_t max_line_bytes) {
  ParallelCorpus corpus;
  try {
    corpus = qkgrad::translation::make_parallel(src, tgt, "fuzz.src", "fuzz.tgt", max_line_bytes);
  } catch (const qkgrad::Error&) {
    return;  // different counts or nothing usable: both are documented errors
  }
  require(src.size() == tgt.size(), "make_parallel accepted files of different lengths");
  require(!corpus.src.empty() && corpus.src.size() == corpus.tgt.size(), "an empty or misaligned corpus");
  require(corpus.src.size() + static_cast<std::size_t>(corpus.dropped_empty + corpus.dropped_long) ==
              src.size(),
          "line pairs lost in counting");
  for (std::size_t i = 0; i < corpus.src.size(); ++i) {
    for (const std::string* side : {&corpus.src[i], &corpus.tgt[i]}) {
      require(!side->empty() && side->size() <= max_line_bytes, "a kept line is empty or too long");
      require(qkgrad::translation::normalize_spaces(*side) == *side, "a kept line is not normalised");
    }
  }
  require(!corpus.summary().empty(), "an empty summary");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  FuzzedDataProvider input(data, size);
  const std::size_t max_line_bytes = input.ConsumeIntegralInRange<std::size_t>(0, 64);
  const std::string src_text = input.ConsumeRandomLengthString(size);
  const std::string tgt_text = input.ConsumeRemainingBytesAsString();

  for (const std::string* text : {&src_text, &tgt_text}) {
    check_valid_utf8(*text);
    check_normalize_spaces(*text);
  }
  std::vector<std::string> src, tgt;
  const bool src_ok = check_split(src_text, src);
  const bool tgt_ok = check_split(tgt_text, tgt);
  if (src_ok && tgt_ok) check_parallel(src, tgt, max_line_bytes);
  return 0;
}
