#include "training/run_dir.h"

#include <errno.h>  // program_invocation_short_name (glibc)
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>

#include "io/checkpoint.h"
#include "io/text.h"

namespace qkgrad::training {

namespace fs = std::filesystem;

RunLock::RunLock(const RunDir& run) {
  const std::string path = run.lock();
  for (;;) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    QKGRAD_CHECK(fd_ >= 0, "train: cannot create the lock file ", path, ": ", std::strerror(errno),
                 "; choose a --run where you may write");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      char buf[32] = {};
      const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
      ::close(fd_);
      fd_ = -1;
      if (err == ENOSYS || err == EOPNOTSUPP || err == ENOLCK) {
        std::fprintf(stderr, "warning: %s: this file system cannot lock files (%s); training without the lock, so make "
                     "sure no other process trains %s at the same time\n", path.c_str(), std::strerror(err),
                     run.root.c_str());
        return;
      }
      QKGRAD_CHECK(err == EWOULDBLOCK, "train: cannot lock ", path, ": ", std::strerror(err));
      const long pid = n > 0 ? std::strtol(buf, nullptr, 10) : 0;
      throw RunInUse(cat("train: ", run.root, " is in use by another training process",
               pid > 0 ? cat(" (pid ", pid, ")") : std::string(),
               "; only one process may train a run at a time. Wait for it to finish, stop it (kill ",
               pid > 0 ? std::to_string(pid) : std::string("it"),
               " saves a checkpoint; then --resume), or choose another --run (nothing was changed)"));
    }
    // The lock file may have been removed (a failed new run cleans up) between our open and our
    // lock: then we hold a lock on a file nobody else sees. Lock the file that is there now.
    struct stat held {}, now {};
    if (::fstat(fd_, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev) {
      break;
    }
    ::close(fd_);
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock is held all the same; only the pid in the message of a second process is lost.
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);
}

void refuse_foreign_directory(const RunDir& run, const std::vector<std::string>& task_files) {
  std::error_code ec;
  if (!fs::is_directory(run.root, ec)) return;
  std::vector<std::string> own = {"options.json", "metrics.jsonl", "curves.svg", "checkpoints", "train.lock"};
  own.insert(own.end(), task_files.begin(), task_files.end());
  std::vector<std::string> foreign;
  for (const auto& entry : fs::directory_iterator(run.root, ec)) {
    const std::string name = entry.path().filename().string();
    const bool mine = std::any_of(own.begin(), own.end(), [&](const std::string& o) { return name.rfind(o, 0) == 0; });
    if (!mine) foreign.push_back(name);
  }
  if (foreign.empty()) return;
  std::sort(foreign.begin(), foreign.end());
  const std::size_t shown = std::min<std::size_t>(foreign.size(), 3);
  fail(cat("train: --run ", run.root, " holds files that are not a training run's (",
           join(std::vector<std::string>(foreign.begin(), foreign.begin() + static_cast<std::ptrdiff_t>(shown)), ", "),
           foreign.size() > shown ? cat(" and ", foreign.size() - shown, " more") : std::string(),
           "); a new run goes into a new or empty directory (or one holding only a run's own files, such as a ",
           "subword model to use): choose another --run. Nothing was written"));
}

namespace {

// The outermost directory of `path` that does not exist yet ("" if `path` exists): what a new
// run creates, and so what it removes again if it fails before its first checkpoint.
fs::path first_missing_directory(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  fs::path top;
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec) && p.has_parent_path() && p.parent_path() != p) {
    top = p;
    p = p.parent_path();
  }
  return top;
}

}  // namespace

NewRunCleanup::NewRunCleanup(const RunDir& run, const std::vector<std::string>& task_files)
    : run_(run), task_files_(task_files), exceptions_(std::uncaught_exceptions()),
      created_top_(first_missing_directory(run.root)) {
  std::error_code ec;
  for (const std::string& f : files()) {
    if (fs::exists(f, ec)) existed_.push_back(f);
  }
  checkpoints_existed_ = fs::exists(run.checkpoints(), ec);
}

NewRunCleanup::~NewRunCleanup() {
  if (!armed_ || std::uncaught_exceptions() <= exceptions_ || checkpoint_exists(run_.last())) return;
  std::error_code ec;
  for (const std::string& f : files()) {
    if (std::find(existed_.begin(), existed_.end(), f) == existed_.end()) fs::remove_all(f, ec);
  }
  if (!checkpoints_existed_) fs::remove(run_.checkpoints(), ec);  // only if empty
  if (created_top_.empty()) return;
  for (fs::path dir = fs::absolute(run_.root).lexically_normal();; dir = dir.parent_path()) {
    fs::remove(dir, ec);  // only if empty
    if (dir == created_top_ || !dir.has_parent_path() || dir.parent_path() == dir) break;
  }
}

// The run's files: options.json, the task's, the harness's own, train.lock last.
std::vector<std::string> NewRunCleanup::files() const {
  std::vector<std::string> all = {run_.options()};
  for (const std::string& name : task_files_) all.push_back(run_.file(name));
  for (const std::string& f : {run_.metrics(), run_.curves(), run_.best(), run_.lock()}) all.push_back(f);
  return all;
}

void check_is_run_directory(const std::string& run_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(run_dir);
  QKGRAD_CHECK(!fs::is_regular_file(p, ec), "--run ", run_dir, " is a file, not a run directory (the directory ",
               "`train --run DIR` made)");
  // A checkpoint given as the run: RUNDIR/checkpoints/NAME.
  if (checkpoint_exists(run_dir) && p.lexically_normal().parent_path().filename() == "checkpoints") {
    const fs::path run = p.lexically_normal().parent_path().parent_path();
    fail(cat("--run ", run_dir, " is a checkpoint, not a run directory: use --run ", run.empty() ? "." : run.string(),
             " --checkpoint ", p.filename().string() == "best" || p.filename().string() == "last" ? p.filename().string()
                                                                                                   : run_dir));
  }
  QKGRAD_CHECK(fs::is_directory(p, ec), "run directory ", run_dir, " does not exist (train a model first: ",
               program_invocation_short_name, " train --run ", run_dir, " ...)");
}

std::string checkpoint_path(const RunDir& run, const std::string& checkpoint) {
  if (checkpoint.empty()) return checkpoint_exists(run.best()) ? run.best() : run.last();
  if (checkpoint == "best") return run.best();
  if (checkpoint == "last") return run.last();
  return checkpoint;
}

std::vector<std::string> kept_step_checkpoints(const std::string& checkpoints_dir) {
  std::vector<std::pair<long long, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(checkpoints_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step-", 0) != 0 || name.size() == 5) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    if (!checkpoint_exists(entry.path().string())) continue;
    found.emplace_back(std::stoll(name.substr(5)), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> paths;
  for (auto& [step, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::string remove_dead_trainers_leftovers(const RunDir& run) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(run.checkpoints(), ec)) {
    const std::string name = entry.path().filename().string();
    const std::size_t dot = name.rfind('.');
    if (dot == std::string::npos) continue;
    const std::string base = name.substr(0, dot), tail = name.substr(dot + 1);  // "last", "tmp-123"
    const bool trainers = base == "last" || base == "best" ||
                          (base.rfind("step-", 0) == 0 && base.size() > 5 &&
                           base.find_first_not_of("0123456789", 5) == std::string::npos);
    const bool tmp = tail.rfind("tmp-", 0) == 0, old = tail.rfind("old-", 0) == 0;
    if (!trainers || !(tmp || old) || tail.size() == 4 || tail.find_first_not_of("0123456789", 4) != std::string::npos) {
      continue;
    }
    if (std::stoll(tail.substr(4)) == ::getpid()) continue;
    if (old && !checkpoint_exists((fs::path(run.checkpoints()) / base).string())) continue;  // the only copy: keep it
    leftovers.push_back(entry.path());
  }
  if (leftovers.empty()) return "";
  std::uintmax_t bytes = 0;
  std::vector<std::string> names;
  for (const fs::path& p : leftovers) {
    for (const auto& f : fs::recursive_directory_iterator(p, ec)) {
      if (f.is_regular_file(ec)) bytes += f.file_size(ec);
    }
    names.push_back(p.filename().string());
    fs::remove_all(p, ec);
  }
  char size[32];
  std::snprintf(size, sizeof size, "%.1f MB", static_cast<double>(bytes) / (1 << 20));
  return cat(join(names, ", "), " (", size, ")");
}

}  // namespace qkgrad::training
