// Small string helpers shared by the translation program's parts.
#pragma once

#include <string>
#include <vector>

namespace qkgrad::translate {

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

}  // namespace qkgrad::translate
