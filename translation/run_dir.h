// Where everything of one training run lives, and loading a trained model back from it.
//
//   RUNDIR/subwords.model, subwords.vocab   the joint SentencePiece model
//   RUNDIR/options.json                     the training options (data, preset, seed, device, ...)
//   RUNDIR/checkpoints/last, best           checkpoints (io/checkpoint.h)
//   RUNDIR/metrics.jsonl                    one JSON object per log line and per evaluation
//   RUNDIR/curves.svg                       training curves, written at the end
//   RUNDIR/train.lock                       held by the training process (RunLock)
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "nn/transformer.h"
#include "translation/subwords.h"

namespace qkgrad::translation {

struct RunDir {
  std::string root;
  std::string subwords() const { return root + "/subwords.model"; }
  std::string options() const { return root + "/options.json"; }
  std::string checkpoints() const { return root + "/checkpoints"; }
  std::string last() const { return root + "/checkpoints/last"; }
  std::string best() const { return root + "/checkpoints/best"; }
  std::string metrics() const { return root + "/metrics.jsonl"; }
  std::string curves() const { return root + "/curves.svg"; }
  std::string lock() const { return root + "/train.lock"; }
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

// Refuses a --run that is no run directory, saying what it is instead: a file, a checkpoint
// (RUNDIR/checkpoints/best: "use --run RUNDIR --checkpoint best"), or nothing.
void check_is_run_directory(const std::string& run_dir);

// What training processes killed mid-save (SIGKILL, a power cut) left in RUNDIR/checkpoints:
// last.tmp-PID, best.tmp-PID, step-N.tmp-PID (a half-written checkpoint: hundreds of MB at the
// paper's size), and last.old-PID or best.old-PID beside a complete last or best. Call it
// holding the run's lock: no other trainer of this run can be writing, so every such entry of
// another process is a dead writer's, even where its pid now names an unrelated live process.
// Removes them and returns their names and total size ("" when there were none).
std::string remove_dead_trainers_leftovers(const RunDir& run);

// A trained model and its vocabulary, with its parameters on `device` (whatever device it was
// trained on). `checkpoint` (the programs' --checkpoint) says which: "" = RUNDIR's best, or its
// last if no evaluation has produced a best yet; "best"; "last"; or the path of a checkpoint
// directory (e.g. one kept by --keep-last, or made by `average`), used with RUNDIR's subwords.
// Errors name what is missing.
struct LoadedModel {
  std::unique_ptr<Subwords> subwords;
  std::unique_ptr<Seq2SeqTransformer> model;
  std::string checkpoint;  // which one was loaded (an ensemble's: "A,B")
  // An ensemble's other members (load_ensemble), with the same vocabulary as `model`.
  std::vector<std::unique_ptr<Seq2SeqTransformer>> others;
  std::vector<Seq2SeqTransformer*> members() const;  // model, then the others
};
LoadedModel load_trained_model(const std::string& run_dir, Device device = Device::cpu, const std::string& checkpoint = "");
// An ensemble (translate and eval --checkpoint A,B,...): every checkpoint of the comma-separated
// list loaded as load_trained_model loads one, each checked against RUNDIR's subwords (so a
// checkpoint of another run of the same data fits; their sizes may differ). One name loads one.
LoadedModel load_ensemble(const std::string& run_dir, Device device, const std::string& checkpoints);

// The checkpoint directory that load_trained_model(run_dir, ..., checkpoint) loads.
std::string checkpoint_path(const RunDir& run, const std::string& checkpoint);

}  // namespace qkgrad::translation
