#include "translate/corpus.h"

#include <cstdio>

#include "core/error.h"
#include "nn/atomic_file.h"
#include "translate/utf8.h"

namespace qkgrad::translate {

bool valid_utf8(const std::string& s, std::size_t* bad_offset) {
  const std::size_t bad = first_invalid_utf8(s);
  if (bad == std::string_view::npos) return true;
  if (bad_offset) *bad_offset = bad;
  return false;
}

std::vector<std::string> read_text_lines(const std::string& path) {
  // 4 GiB is far above any corpus this program trains on, and still a bound.
  const std::string text = read_file(path, std::size_t{1} << 32);
  return split_text_lines(text, path);
}

std::vector<std::string> split_text_lines(std::string_view text, const std::string& path) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  int64_t line_no = 1;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    QKGRAD_CHECK(line.find('\0') == std::string::npos, path, ":", line_no,
                 ": contains a NUL byte; this is not a text file (or it is UTF-16: convert it to UTF-8)");
    std::size_t bad = 0;
    QKGRAD_CHECK(valid_utf8(line, &bad), path, ":", line_no, ": invalid UTF-8 at byte ", bad + 1,
                 " of the line; convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
    lines.push_back(std::move(line));
    start = end + 1;
    ++line_no;
  }
  return lines;
}

std::string normalize_spaces(const std::string& line) {
  std::string out;
  bool pending_space = false;
  for (char ch : line) {
    const bool space = ch == ' ' || ch == '\t' || ch == '\v' || ch == '\f' || ch == '\r' || ch == '\n';
    if (space) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(ch);
  }
  return out;
}

std::string ParallelCorpus::summary() const {
  return cat(src.size(), " pairs (dropped: ", dropped_empty, " with an empty side, ", dropped_long,
             " over the length limit)");
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path, std::size_t max_line_bytes) {
  return make_parallel(read_text_lines(src_path), read_text_lines(tgt_path), src_path, tgt_path,
                       max_line_bytes);
}

ParallelCorpus make_parallel(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                             const std::string& src_path, const std::string& tgt_path,
                             std::size_t max_line_bytes) {
  QKGRAD_CHECK(src.size() == tgt.size(), "misaligned corpus: ", src_path, " has ", src.size(), " lines but ",
               tgt_path, " has ", tgt.size(), "; line i of one must translate line i of the other");
  ParallelCorpus corpus;
  for (std::size_t i = 0; i < src.size(); ++i) {
    std::string s = normalize_spaces(src[i]), t = normalize_spaces(tgt[i]);
    if (s.empty() || t.empty()) {
      ++corpus.dropped_empty;
    } else if (s.size() > max_line_bytes || t.size() > max_line_bytes) {
      ++corpus.dropped_long;
    } else {
      corpus.src.push_back(std::move(s));
      corpus.tgt.push_back(std::move(t));
    }
  }
  QKGRAD_CHECK(!corpus.src.empty(), "empty corpus: ", src_path, " and ", tgt_path, " have no usable line pairs (",
               corpus.summary(), ")");
  return corpus;
}

}  // namespace qkgrad::translate
