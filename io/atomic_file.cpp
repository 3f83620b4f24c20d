// Atomic file writes (temporary file, fsync, rename, fsync the directory) and size-limited
// whole-file reads. See io/atomic_file.h for the recipe and why each step is there.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"

namespace qkgrad {

namespace {

// strerror(err), or a generic reason when a failing call did not set errno.
std::string reason(int err) { return err != 0 ? std::strerror(err) : "unknown I/O error"; }

// The directory that holds `path`: "runs/model.st" -> "runs", "model.st" -> ".", "/x" -> "/".
std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Makes the rename durable: fsync on the directory writes its entry for the new file to
// disk. A file system that cannot sync directories (EINVAL) is accepted as it is.
void sync_directory(const std::string& path) {
  const std::string dir = directory_of(path);
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int err = 0;
  if (fd < 0) {
    err = errno;
  } else {
    if (::fsync(fd) != 0 && errno != EINVAL) err = errno;
    ::close(fd);
  }
  QKGRAD_CHECK(err == 0, "write_file_atomically: '", path, "' was written, but syncing its ",
               "directory '", dir, "' failed: ", reason(err),
               "; the new file is in place but might not survive a power cut");
}

// Removes PATH.tmp.PID files left by writers that died before their rename (SIGKILL, a crash).
void remove_stale_temporaries(const std::string& path) {
  remove_leftovers_of_dead_processes(directory_of(path), std::filesystem::path(path).filename().string() + ".tmp.");
}

}  // namespace

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno != EPERM) return false;  // ESRCH: no such process
  // /proc/PID/stat: "PID (COMM) STATE ...", COMM may hold spaces and parentheses: the state is
  // the first character after the last ')'. Z: a zombie, X: dead.
  std::FILE* f = std::fopen(cat("/proc/", pid, "/stat").c_str(), "r");
  if (f == nullptr) return true;  // no /proc: kill's answer stands
  char buf[512];
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  const std::string stat(buf, n);
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return true;
  const char state = stat[close + 2];
  return state != 'Z' && state != 'X';
}

void remove_leftovers_of_dead_processes(const std::string& dir, const std::string& prefix,
                                        const std::vector<std::string>& suffixes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> stale;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    pid_t pid = 0;
    const char* first = name.data() + prefix.size();
    const char* last = name.data() + name.size();
    const auto r = std::from_chars(first, last, pid);
    if (r.ec != std::errc() || pid <= 0 || pid == ::getpid()) continue;
    if (std::find(suffixes.begin(), suffixes.end(), std::string(r.ptr, last)) == suffixes.end()) continue;
    // A live process's file is its own business (another user's counts as live).
    if (!process_alive(pid)) stale.push_back(entry.path());
  }
  for (const fs::path& leftover : stale) fs::remove(leftover, ec);
}

void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& write) {
  QKGRAD_CHECK(!path.empty() && path.back() != '/', "write_file_atomically: '", path,
               "' is not a file name; give the path of the file to write");
  // The process id keeps two processes that write the same path from sharing a temporary.
  const std::string temp = cat(path, ".tmp.", ::getpid());
  remove_stale_temporaries(path);

  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) {
    const int err = errno;
    fail(cat("write_file_atomically: cannot create the temporary file '", temp, "' to write '",
             path, "': ", reason(err), "; check that the directory '", directory_of(path),
             "' exists and that you may write to it"));
  }

  // Every failure from here on closes and removes the temporary file before throwing, so the
  // old file at `path` is never touched. `err` is errno as the failing call left it.
  auto give_up = [&](int err, const char* step) {
    if (file != nullptr) std::fclose(file);
    std::remove(temp.c_str());
    fail(cat("write_file_atomically: ", step, " '", path, "' failed: ", reason(err),
             err == ENOSPC || err == EDQUOT || err == EFBIG
                 ? "; free some disk space (or raise the quota or file size limit) and try again"
                 : "; check the disk and the permissions of the directory",
             "; the previous file (if any) is unchanged"));
  };

  errno = 0;
  try {
    write(file);
  } catch (...) {
    std::fclose(file);
    std::remove(temp.c_str());
    throw;  // the caller's own exception, unchanged
  }
  // std::ferror remembers a failure of any earlier write, so a writer that ignored the
  // return value of fwrite is still caught here; errno still holds that failure's reason.
  if (std::ferror(file)) give_up(errno, "writing");
  if (std::fflush(file) != 0) give_up(errno, "writing");
  if (::fsync(::fileno(file)) != 0) give_up(errno, "syncing to disk");
  const int closed = std::fclose(file);
  file = nullptr;
  if (closed != 0) give_up(errno, "closing");
  if (std::rename(temp.c_str(), path.c_str()) != 0) give_up(errno, "renaming the new file over");
  sync_directory(path);
}

void check_can_write(const std::string& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  QKGRAD_CHECK(!path.empty() && path.back() != '/', what, ": '", path, "' is not a file name; give the path of a file");
  QKGRAD_CHECK(!fs::is_directory(path, ec), what, ": '", path, "' is a directory; give the path of a file to write");
  const std::string dir = directory_of(path);
  QKGRAD_CHECK(fs::is_directory(dir, ec), what, ": the directory '", dir, "' does not exist; create it (mkdir -p ",
               dir, ") or choose another path");
  const std::string probe = cat(path, ".tmp.", ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == EEXIST) return;  // our own temporary, from an earlier write: the directory is writable
    fail(cat(what, ": cannot create files in '", dir, "': ", reason(err),
             "; choose a path where you may write (nothing was done)"));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string read_file(const std::string& path, std::size_t max_bytes) {
  // O_NONBLOCK: opening a FIFO (or a device) for reading would otherwise wait for a writer
  // forever, before the regular-file check below could refuse it. It changes nothing for a
  // regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    fail(cat("read_file: cannot open '", path, "': ", reason(err),
             err == ELOOP ? " (a symbolic link that leads back to itself, so it never reaches a file); point it at the "
                            "file it should name"
                          : "; check the path and its permissions"));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(::fdopen(fd, "rb"), &std::fclose);
  if (!file) {
    const int err = errno;
    ::close(fd);
    fail(cat("read_file: cannot read '", path, "': ", reason(err)));
  }
  struct stat info {};
  if (::fstat(::fileno(file.get()), &info) != 0) {
    const int err = errno;
    fail(cat("read_file: cannot read the size of '", path, "': ", reason(err)));
  }
  QKGRAD_CHECK(S_ISREG(info.st_mode), "read_file: '", path, "' is not a regular file (",
               S_ISDIR(info.st_mode) ? "a directory" : S_ISFIFO(info.st_mode) ? "a FIFO" : "a device or socket",
               "); give the path of a file (copy a stream to a file first)");
  const auto size = static_cast<std::size_t>(info.st_size);
  QKGRAD_CHECK(size <= max_bytes, "read_file: '", path, "' is ", size,
               " bytes, more than the limit of ", max_bytes, " bytes; is it the right file?");

  std::string contents(size, '\0');
  const std::size_t got = size == 0 ? 0 : std::fread(contents.data(), 1, size, file.get());
  if (got != size) {
    const int err = std::ferror(file.get()) ? errno : 0;
    fail(cat("read_file: reading '", path, "' stopped after ", got, " of ", size, " bytes: ",
             err != 0 ? reason(err) : "the file got shorter while being read",
             "; check the disk, or that nothing else is writing the file"));
  }
  return contents;
}

}  // namespace qkgrad
