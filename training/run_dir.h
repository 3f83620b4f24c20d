// The run directory: where everything of one training run lives, whichever program trains it.
//
//   RUNDIR/options.json          the training options (data, preset, seed, device, ...)
//   RUNDIR/checkpoints/last, best, step-N   checkpoints (io/checkpoint.h)
//   RUNDIR/metrics.jsonl         one JSON object per log line and per evaluation
//   RUNDIR/curves.svg            training curves
//   RUNDIR/train.lock            held by the training process (RunLock)
//   RUNDIR/...                   the task's own files (qkgrad-translate: its subword model)
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"

namespace qkgrad::training {

struct RunDir {
  std::string root;
  std::string file(const std::string& name) const { return root + "/" + name; }
  std::string options() const { return file("options.json"); }
  std::string checkpoints() const { return file("checkpoints"); }
  std::string last() const { return file("checkpoints/last"); }
  std::string best() const { return file("checkpoints/best"); }
  std::string metrics() const { return file("metrics.jsonl"); }
  std::string curves() const { return file("curves.svg"); }
  std::string lock() const { return file("train.lock"); }
};

// Thrown by RunLock when another process holds the lock.
class RunInUse : public Error {
 public:
  using Error::Error;
};

// One training process per run directory: an exclusive flock(2) on RUNDIR/train.lock, which
// holds the owner's process id. The kernel drops the lock when the process ends, however it
// ends (a crash or SIGKILL included), so there is never a stale lock to remove by hand. The
// directory must exist. A second process is refused at once (RunInUse, naming the first one's
// pid and what to do). On a file system without flock (Lustre without -o flock, some FUSE
// mounts) it warns on stderr and goes on without the lock.
class RunLock {
 public:
  explicit RunLock(const RunDir& run);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

 private:
  int fd_ = -1;
};

// A new run goes into a new or empty directory, or one that holds only a run's own files (an
// earlier attempt, or a file of the task's put there by hand, such as a subword model): never
// beside another program's files, which it would silently mix with its own. `task_files`: the
// names (or name prefixes) of the task's files at the top of the run directory. Throws, naming
// up to three foreign files.
void refuse_foreign_directory(const RunDir& run, const std::vector<std::string>& task_files);

// A new run that fails (or is interrupted) before its first checkpoint removes what it created:
// the run files that were not there before (train.lock last), then the directories it created,
// deepest first, each only if empty: never a whole directory tree, which another run (a sibling
// under the same new parent, or a process that took the lock since) may be using.
// Made before anything is created (it notes what exists), armed once the run is this process's.
class NewRunCleanup {
 public:
  NewRunCleanup(const RunDir& run, const std::vector<std::string>& task_files);
  void arm() { armed_ = true; }
  ~NewRunCleanup();
  NewRunCleanup(const NewRunCleanup&) = delete;
  NewRunCleanup& operator=(const NewRunCleanup&) = delete;

 private:
  std::vector<std::string> files() const;
  RunDir run_;
  std::vector<std::string> task_files_;
  int exceptions_;
  bool armed_ = false;
  bool checkpoints_existed_ = false;
  std::filesystem::path created_top_;  // the first directory of the run's path that did not exist
  std::vector<std::string> existed_;
};

// Refuses a --run that is no run directory, saying what it is instead: a file, a checkpoint
// (RUNDIR/checkpoints/best: "use --run RUNDIR --checkpoint best"), or nothing.
void check_is_run_directory(const std::string& run_dir);

// The checkpoint directory a program's --checkpoint names: "" = RUNDIR's best, or its last if no
// evaluation has produced a best yet; "best"; "last"; or the path of a checkpoint directory.
std::string checkpoint_path(const RunDir& run, const std::string& checkpoint);

// The step-N checkpoints that train --keep-last leaves in CHECKPOINTS_DIR, oldest first.
std::vector<std::string> kept_step_checkpoints(const std::string& checkpoints_dir);

// What training processes killed mid-save (SIGKILL, a power cut) left in RUNDIR/checkpoints:
// last.tmp-PID, best.tmp-PID, step-N.tmp-PID (a half-written checkpoint: hundreds of MB at the
// paper's size), and last.old-PID or best.old-PID beside a complete last or best. Call it
// holding the run's lock: no other trainer of this run can be writing, so every such entry of
// another process is a dead writer's, even where its pid now names an unrelated live process.
// Removes them and returns their names and total size ("" when there were none).
std::string remove_dead_trainers_leftovers(const RunDir& run);

}  // namespace qkgrad::training
