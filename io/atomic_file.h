// Writing a file so that a crash, a full disk or an exception never leaves a half-written
// file behind, and reading a whole file with a size limit. Checkpoints (io/safetensors.h)
// are written this way: after a failure, the previous checkpoint is still there, intact.
//
// The recipe (POSIX):
//   1. write everything to a temporary file in the same directory ("model.safetensors.tmp.4242",
//      the number being the process id, so two processes never share one);
//   2. check every write (std::ferror), flush, fsync (the bytes are on disk), close;
//   3. rename() it over the target: on POSIX this replaces the old file in one step, so a
//      reader sees either the old file or the new one, never a mix;
//   4. fsync the directory, so that the rename itself survives a power cut.
// On any failure the temporary file is removed and the old file is left untouched. A writer
// killed before step 3 (SIGKILL, a crash) leaves its temporary behind; the next write of the
// same path removes the temporaries of processes that no longer run.
#pragma once

#include <cstddef>
#include <sys/types.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace qkgrad {

// Writes the file at `path` atomically; `write` writes the contents to the FILE* it is given
// (with std::fwrite, std::fputs, ...; it need not check for errors, this function does).
// Throws qkgrad::Error naming the path, the system's reason (strerror) and what to do when
// the temporary file cannot be created, a write fails (e.g. a full disk), or the rename fails.
// An exception thrown by `write` itself is passed on unchanged, after the cleanup.
// The new file gets the default permissions (0666 less the umask), not those of the old one.
void write_file_atomically(const std::string& path, const std::function<void(std::FILE*)>& write);

// Whether process `pid` still runs: it exists and is not a zombie (a killed process stays in the
// process table, for kill(pid, 0) to find, until its parent waits for it; its files are as dead
// as it is). Another user's process counts as running.
bool process_alive(pid_t pid);

// Removes the files in `dir` named PREFIX + PID + SUFFIX (SUFFIX one of `suffixes`) whose
// process PID no longer runs, never this process's own: what writers killed mid-write leave
// (write_file_atomically's PATH.tmp.PID, SentencePiece's subwords.tmp-PID.model, ...).
void remove_leftovers_of_dead_processes(const std::string& dir, const std::string& prefix,
                                        const std::vector<std::string>& suffixes = {""});

// Checks, before any long work, that write_file_atomically(path) will be able to create its
// file: `path` is not a directory, its directory exists, and a file can be created there (tried
// for real, so read-only mounts and permissions count, also for root). Throws qkgrad::Error
// starting with `what` (e.g. "translate: --output out/t.txt"), naming the problem and what to do.
void check_can_write(const std::string& path, const std::string& what);

// The whole contents of the file at `path`. Throws qkgrad::Error naming the path when it is
// missing, unreadable, not a regular file, or larger than max_bytes.
std::string read_file(const std::string& path, std::size_t max_bytes);

}  // namespace qkgrad
