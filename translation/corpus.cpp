#include "translation/corpus.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <zlib.h>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/text.h"

namespace qkgrad::translation {

namespace {

bool gzipped(const std::string& path) { return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0; }

// A .gz file decompressed (zlib), with read_file's bound on the size (of the text).
std::string read_gzip_file(const std::string& path, std::size_t max_bytes) {
  std::error_code ec;
  QKGRAD_CHECK(std::filesystem::is_regular_file(path, ec), "cannot open '", path, "': ",
               ec.value() == ELOOP ? "a symbolic link that leads back to itself (it never reaches a file)"
               : std::filesystem::exists(path, ec) ? "not a regular file" : "No such file or directory");
  gzFile file = ::gzopen(path.c_str(), "rb");
  QKGRAD_CHECK(file != nullptr, "cannot open '", path, "': ", std::strerror(errno));
  std::string text;
  char buffer[1 << 16];
  for (;;) {
    const int n = ::gzread(file, buffer, sizeof buffer);
    if (n < 0) {
      int code = 0;
      const std::string why = ::gzerror(file, &code);
      ::gzclose(file);
      fail(cat(path, ": not a valid gzip file (", why, "); decompress it with gunzip to see what is wrong"));
    }
    if (n == 0) {  // the end, or a stream cut short (zlib reports it here)
      int code = Z_OK;
      const std::string why = ::gzerror(file, &code);
      QKGRAD_CHECK(code == Z_OK || code == Z_STREAM_END, path, ": not a valid gzip file (", why,
                   "); decompress it with gunzip to see what is wrong");
      break;
    }
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > max_bytes) {
      ::gzclose(file);
      fail(cat(path, ": decompresses to more than ", max_bytes, " bytes; split it"));
    }
  }
  QKGRAD_CHECK(::gzclose(file) == Z_OK, path, ": not a valid gzip file (it ends too soon or fails its check); "
               "decompress it with gunzip to see what is wrong");
  return text;
}

}  // namespace

std::string read_corpus_file(const std::string& path) {
  // 4 GiB is far above any corpus this program trains on, and still a bound.
  constexpr std::size_t kMax = std::size_t{1} << 32;
  return gzipped(path) ? read_gzip_file(path, kMax) : read_file(path, kMax);
}

std::string corpus_path(const std::string& dir, const std::string& split, const std::string& lang) {
  const std::string plain = dir + "/" + split + "." + lang;
  std::error_code ec;
  if (!std::filesystem::exists(plain, ec) && std::filesystem::exists(plain + ".gz", ec)) return plain + ".gz";
  return plain;
}

std::vector<std::string> read_text_lines(const std::string& path) { return split_text_lines(read_corpus_file(path), path); }

namespace {

// The checks every line read gets: no NUL byte, valid UTF-8; errors name the file and line.
void check_text_line(const std::string& line, const std::string& name, int64_t line_no) {
  QKGRAD_CHECK(line.find('\0') == std::string::npos, name, ":", line_no,
               ": contains a NUL byte; this is not a text file (or it is UTF-16: convert it to UTF-8)");
  const std::size_t bad = first_invalid_utf8(line);
  QKGRAD_CHECK(bad == std::string_view::npos, name, ":", line_no, ": invalid UTF-8 at byte ", bad + 1,
               " of the line; convert the file to UTF-8 (e.g. iconv -f latin1 -t utf-8)");
}

// Walks the lines of a text one at a time, checking each (NUL bytes, UTF-8), so that a caller
// can keep only the lines it wants: memory stays bounded by what is kept, not by the line count.
class LineCursor {
 public:
  LineCursor(std::string_view text, const std::string& name) : text_(text), name_(name) {}
  // The next line (its \n or \r\n stripped) into `line`; false at the end of the text.
  bool next(std::string& line) {
    if (start_ >= text_.size()) return false;
    std::size_t end = text_.find('\n', start_);
    if (end == std::string_view::npos) end = text_.size();
    line.assign(text_.substr(start_, end - start_));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    check_text_line(line, name_, ++line_no_);
    start_ = end + 1;
    return true;
  }
  int64_t lines_read() const { return line_no_; }

 private:
  std::string_view text_;
  const std::string& name_;
  std::size_t start_ = 0;
  int64_t line_no_ = 0;
};

// Adds one aligned pair to `corpus`, normalised (normalize_spaces, io/text.h), or counts why it
// was dropped. The lines are valid UTF-8 here when they come from a file (LineCursor checks).
void add_pair(ParallelCorpus& corpus, const std::string& src, const std::string& tgt, std::size_t max_line_bytes) {
  std::string s = normalize_spaces(src), t = normalize_spaces(tgt);
  if (s.empty() || t.empty()) {
    ++corpus.dropped_empty;
  } else if (s.size() > max_line_bytes || t.size() > max_line_bytes) {
    ++corpus.dropped_long;
  } else {
    corpus.src.push_back(std::move(s));
    corpus.tgt.push_back(std::move(t));
  }
}

void check_parallel(const ParallelCorpus& corpus, int64_t src_lines, int64_t tgt_lines, const std::string& src_path,
                    const std::string& tgt_path) {
  QKGRAD_CHECK(src_lines == tgt_lines, "misaligned corpus: ", src_path, " has ", src_lines, " lines but ", tgt_path,
               " has ", tgt_lines, "; line i of one must translate line i of the other");
  QKGRAD_CHECK(!corpus.src.empty(), "empty corpus: ", src_path, " and ", tgt_path, " have no usable line pairs (",
               corpus.summary(), ")");
}

}  // namespace

std::vector<std::string> split_text_lines(std::string_view text, const std::string& path) {
  std::vector<std::string> lines;
  LineCursor cursor(text, path);
  for (std::string line; cursor.next(line);) lines.push_back(line);
  return lines;
}

LineReader::LineReader(const std::string& path) : name_(path.empty() ? "<stdin>" : path) {
  if (path.empty()) {
    fd_ = STDIN_FILENO;
    return;
  }
  QKGRAD_CHECK(!std::filesystem::is_directory(path), path, ": is a directory, not a text file");
  if (gzipped(path)) {  // not streamed: zlib reads whole buffers
    buffer_ = read_corpus_file(path);
    ended_ = true;
    return;
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  QKGRAD_CHECK(fd_ >= 0, "cannot open '", path, "': ", std::strerror(errno));
  owned_ = true;
}

LineReader::~LineReader() {
  if (owned_) ::close(fd_);
}

bool LineReader::read_more() {
  if (ended_) return false;
  if (pos_ > 0) {  // drop what was returned before growing the buffer
    buffer_.erase(0, pos_);
    pos_ = 0;
  }
  char chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n > 0) {
      buffer_.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
    if (n == 0) {
      ended_ = true;
      return false;
    }
    QKGRAD_CHECK(errno == EINTR, name_, ": reading failed after line ", line_no_, ": ", std::strerror(errno));
  }
}

bool LineReader::ready() {
  if (ended_ || buffer_.find('\n', pos_) != std::string::npos) return true;
  pollfd p{fd_, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;  // data, or the writer's end (POLLHUP): either way no waiting
}

bool LineReader::next(std::string& line) {
  std::size_t newline;
  while ((newline = buffer_.find('\n', pos_)) == std::string::npos) {
    if (!read_more()) {
      if (pos_ >= buffer_.size()) return false;
      newline = buffer_.size();  // a last line without its \n
      break;
    }
  }
  line.assign(buffer_, pos_, newline - pos_);
  pos_ = std::min(newline + 1, buffer_.size());
  if (!line.empty() && line.back() == '\r') line.pop_back();
  check_text_line(line, name_, ++line_no_);
  return true;
}

std::string ParallelCorpus::summary() const {
  return cat(src.size(), " pairs (dropped: ", dropped_empty, " with an empty side, ", dropped_long,
             " over the length limit)");
}

// Both files are read whole (their bytes are bounded by read_file), but only the kept pairs are
// stored: a file of millions of empty lines costs its bytes, not a string per line.
ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path, std::size_t max_line_bytes) {
  const std::string src_text = read_corpus_file(src_path);
  const std::string tgt_text = read_corpus_file(tgt_path);
  LineCursor src(src_text, src_path), tgt(tgt_text, tgt_path);
  ParallelCorpus corpus;
  std::string s, t;
  for (;;) {
    const bool has_s = src.next(s), has_t = tgt.next(t);
    if (!has_s || !has_t) {  // count the rest of the longer file, for the error message
      while (has_s && src.next(s)) {
      }
      while (has_t && tgt.next(t)) {
      }
      break;
    }
    add_pair(corpus, s, t, max_line_bytes);
  }
  check_parallel(corpus, src.lines_read(), tgt.lines_read(), src_path, tgt_path);
  return corpus;
}

ParallelCorpus make_parallel(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                             const std::string& src_path, const std::string& tgt_path,
                             std::size_t max_line_bytes) {
  ParallelCorpus corpus;
  if (src.size() == tgt.size()) {
    for (std::size_t i = 0; i < src.size(); ++i) add_pair(corpus, src[i], tgt[i], max_line_bytes);
  }
  check_parallel(corpus, static_cast<int64_t>(src.size()), static_cast<int64_t>(tgt.size()), src_path, tgt_path);
  return corpus;
}

}  // namespace qkgrad::translation
