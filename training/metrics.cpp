#include "training/metrics.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/text.h"

namespace qkgrad::training {

Series History::series(const std::string& name, const std::string& with) const {
  Series points;
  for (const Json& line : lines) {
    if (line.contains(name) && (with.empty() || line.contains(with))) {
      points.emplace_back(line.at("step").get<double>(), line.at(name).get<double>());
    }
  }
  return points;
}

std::map<std::string, Series> History::object_series(const std::string& name) const {
  std::map<std::string, Series> all;
  for (const Json& line : lines) {
    if (!line.contains(name)) continue;
    const double step = line.at("step").get<double>();
    for (const auto& [member, value] : line.at(name).items()) all[member].emplace_back(step, value.get<double>());
  }
  return all;
}

namespace {

// A line is an object with an integer "step", and numbers or objects of numbers.
void check_line(const Json& line, const std::string& source) {
  const JsonFields fields(line, source);
  fields.integer("step");
  for (const auto& [key, value] : line.items()) {
    if (!value.is_object()) {
      fields.number(key);
      continue;
    }
    const JsonFields members = fields.object(key);
    for (const auto& item : value.items()) members.number(item.key());
  }
}

}  // namespace

void append_metrics(const std::string& path, const Json& line, History& history) {
  const std::string text = dump_json(line) + "\n";
  check_line(line, path);
  history.lines.push_back(line);
  std::FILE* f = std::fopen(path.c_str(), "a");
  QKGRAD_CHECK(f != nullptr, "cannot append to ", path, ": ", std::strerror(errno));
  std::fputs(text.c_str(), f);
  int err = std::ferror(f) != 0 ? errno : 0;
  if (std::fclose(f) != 0 && err == 0) err = errno;  // buffered: a full disk shows up here
  QKGRAD_CHECK(err == 0, "appending to ", path, " failed: ", std::strerror(err),
               "; free some disk space and continue with --resume");
}

History reload_metrics(const std::string& path, int64_t up_to_step, int64_t* dropped_partial) {
  History h;
  if (!std::filesystem::exists(path)) return h;
  const std::string text = read_file(path, std::size_t{1} << 32);
  std::string kept;
  std::size_t start = 0;
  int64_t line_no = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\n', start);
    const std::string line = text.substr(start, end == std::string::npos ? std::string::npos : end - start);
    start = end == std::string::npos ? text.size() : end + 1;
    ++line_no;
    if (line.empty()) continue;
    if (end == std::string::npos) {  // no newline: a write cut short
      ++*dropped_partial;
      continue;
    }
    try {
      const std::string source = cat(path, ":", line_no);
      Json j = parse_json(line, source);
      check_line(j, source);
      if (j.at("step").get<int64_t>() > up_to_step) continue;
      h.lines.push_back(std::move(j));
    } catch (const Error& e) {
      fail(cat("train --resume: ", e.what(), "; ", path, " is damaged: delete line ", line_no,
               " (or the whole file, losing the curves before step ", up_to_step, ") and resume again"));
    }
    kept += line + "\n";
  }
  write_file_atomically(path, [&](std::FILE* f) { std::fputs(kept.c_str(), f); });
  return h;
}

std::optional<std::pair<double, double>> best_point(const Series& series, bool lower_is_better) {
  std::optional<std::pair<double, double>> best;
  for (const auto& point : series) {
    if (!best || (lower_is_better ? point.second < best->second : point.second > best->second)) best = point;
  }
  return best;
}

}  // namespace qkgrad::training
