// Reading text corpora safely: UTF-8 validation with the file and line of the first bad byte,
// CRLF line endings, NUL bytes, over-long lines and misaligned parallel files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "io/text.h"

namespace qkgrad::translation {

// A corpus file's bytes: read whole (io/atomic_file.h read_file: FIFOs and devices refused),
// or decompressed when its name ends in .gz (zlib).
std::string read_corpus_file(const std::string& path);

// DIR/SPLIT.LANG, or DIR/SPLIT.LANG.gz when only that exists.
std::string corpus_path(const std::string& dir, const std::string& split, const std::string& lang);

// The lines of a UTF-8 text file, gzipped or not (line endings \n or \r\n, stripped). Throws an Error naming the
// file and line for invalid UTF-8 or a NUL byte, and for a missing or unreadable file.
std::vector<std::string> read_text_lines(const std::string& path);

// What read_text_lines does after reading the file: splits `text` into lines with the same
// checks; `name` (the path) starts every error message.
std::vector<std::string> split_text_lines(std::string_view text, const std::string& name);

// Reads a text one line at a time, as it arrives (stdin on a pipe or a terminal, or a file; a
// .gz file is decompressed first), with read_text_lines' checks and errors: for streaming
// translation.
class LineReader {
 public:
  explicit LineReader(const std::string& path);  // "" = stdin
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  bool next(std::string& line);  // false at the end; waits for input that has not arrived yet
  // Whether next() would return at once: a whole line is already read, the input has ended, or
  // more of it is waiting to be read. A program answering a pipe translates what it has when
  // this is false, instead of waiting for a full batch.
  bool ready();
  const std::string& name() const { return name_; }
  int64_t lines_read() const { return line_no_; }

 private:
  bool read_more();  // appends what the descriptor gives (waiting for it); false at its end

  std::string name_;
  int fd_ = -1;           // stdin, or the file (none for a .gz input, decompressed whole)
  bool owned_ = false;
  std::string buffer_;    // read but not yet returned: from pos_ on
  std::size_t pos_ = 0;
  bool ended_ = false;    // the descriptor has nothing more
  int64_t line_no_ = 0;
};

// Every run of whitespace (tabs, no-break spaces, U+3000, ...: the set of is_whitespace in
// io/text.h) becomes one space, and none is left at either end; zero-width characters are kept.
// The one normaliser of the project (io/text.h), also the Bible cleaner's; named here too for
// the corpus reader's users.
using qkgrad::normalize_spaces;

struct ParallelCorpus {
  std::vector<std::string> src, tgt;  // aligned, whitespace-normalised, both non-empty
  int64_t dropped_empty = 0;          // pairs where a side was empty or whitespace only
  int64_t dropped_long = 0;           // pairs where a side had more than max_line_bytes
  std::string summary() const;        // "12,345 pairs (dropped: 3 empty, 1 over 4096 bytes)"
};

// Reads two aligned files (line i of one translates line i of the other). Different line counts
// are an Error naming both files and both counts; an empty result is an Error too.
ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path,
                             std::size_t max_line_bytes = 2000);

// What read_parallel does after reading both files: aligns, normalises and filters the lines,
// with the same checks and errors; the names (paths) appear in the messages.
ParallelCorpus make_parallel(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                             const std::string& src_name, const std::string& tgt_name,
                             std::size_t max_line_bytes = 2000);

}  // namespace qkgrad::translation
