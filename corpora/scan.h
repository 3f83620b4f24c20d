// Small ASCII scanning helpers that the diatheke output parser (bible.cpp) and the verse
// cleaner (bible_text.cpp) share. Internal to corpora/: the public headers do not include it.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qkgrad::corpora::scan {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The ASCII blanks of diatheke's line structure (space, tab, CR, LF). Whitespace inside a verse's
// text is normalize_spaces' business (io/text.h), not this.
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

// `s` without is_space characters at either end.
inline std::string trim(std::string_view s) {
  std::size_t begin = 0, end = s.size();
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return std::string(s.substr(begin, end - begin));
}

// Reads the digits at line[pos...] into `number` (at most 4 digits); returns the position after
// them, or npos when there are none.
inline std::size_t read_number(std::string_view line, std::size_t pos, int& number) {
  std::size_t end = pos;
  number = 0;
  while (end < line.size() && is_digit(line[end]) && end - pos < 4) {
    number = number * 10 + (line[end] - '0');
    ++end;
  }
  return end == pos ? std::string_view::npos : end;
}

}  // namespace qkgrad::corpora::scan
