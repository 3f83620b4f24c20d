#include "translation/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/text.h"

namespace qkgrad::translation {

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
               "qkgrad-translate train --run ", run_dir, " ...)");
}

std::string checkpoint_path(const RunDir& run, const std::string& checkpoint) {
  if (checkpoint.empty()) return checkpoint_exists(run.best()) ? run.best() : run.last();
  if (checkpoint == "best") return run.best();
  if (checkpoint == "last") return run.last();
  return checkpoint;
}

LoadedModel load_trained_model(const std::string& run_dir, Device device, const std::string& checkpoint) {
  const RunDir run{run_dir};
  check_is_run_directory(run_dir);
  QKGRAD_CHECK(checkpoint.find(',') == std::string::npos, "--checkpoint ", checkpoint, ": an ensemble (a list A,B) is "
               "for decoding, with translate and eval; this command uses one model (to combine checkpoints into one, "
               "`average` them)");
  LoadedModel loaded;
  loaded.checkpoint = checkpoint_path(run, checkpoint);
  if (checkpoint.empty()) {
    QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), run_dir, " has no checkpoint (neither ", run.best(), " nor ",
                 run.last(), "); train first");
  } else {
    QKGRAD_CHECK(checkpoint_exists(loaded.checkpoint), "--checkpoint ", checkpoint, ": ", loaded.checkpoint,
                 " is not a checkpoint (choose best, last, or a checkpoint directory such as ", run.checkpoints(),
                 "/step-N)");
  }
  // A damaged file gets an error that says which file, what is wrong with it, and what to do.
  const std::string remedy =
      loaded.checkpoint == run.best() && checkpoint_exists(run.last())
          ? cat("; if ", run.last(), " is intact, move ", run.best(), " away to use it; otherwise train again")
          : cat("; train again (or, if training is still running, wait for its next checkpoint)");
  try {
    loaded.subwords = std::make_unique<Subwords>(run.subwords());
  } catch (const Error& e) {
    fail(cat(e.what(), "; the run directory ", run_dir, " is incomplete or damaged: train again"));
  }
  TransformerConfig config;
  try {
    config = load_checkpoint_config(loaded.checkpoint);
  } catch (const Error& e) {
    fail(cat("cannot load checkpoint ", loaded.checkpoint, ": ", e.what(), remedy));
  }
  QKGRAD_CHECK(config.vocab == loaded.subwords->vocab_size(), loaded.checkpoint, " was trained with a vocabulary of ",
               config.vocab, " but ", run.subwords(), " has ", loaded.subwords->vocab_size(),
               " pieces; the run directory mixes files of two runs");
  // The same pieces, scores and normaliser: the same vocabulary, whichever training wrote the
  // file (checkpoints before 2026-12-04 name it by the file's bytes: that is accepted too).
  QKGRAD_CHECK(config.vocabulary_id.empty() || loaded.subwords->identifies(config.vocabulary_id), loaded.checkpoint,
               " was trained with another subword model than ", run.subwords(), " (vocabulary ", config.vocabulary_id,
               ", but the file is ", loaded.subwords->fingerprint(),
               "): the run directory mixes files of two runs; put the checkpoint back in the run it came from");
  if (config.vocabulary_id.empty()) config.vocabulary_id = loaded.subwords->fingerprint();
  loaded.model = std::make_unique<Seq2SeqTransformer>(config, device);
  try {
    load_model_weights(loaded.checkpoint, *loaded.model);
  } catch (const Error& e) {
    fail(cat("cannot load checkpoint ", loaded.checkpoint, ": ", e.what(), remedy));
  }
  loaded.model->eval();
  return loaded;
}

std::vector<Seq2SeqTransformer*> LoadedModel::members() const {
  std::vector<Seq2SeqTransformer*> all{model.get()};
  for (const auto& m : others) all.push_back(m.get());
  return all;
}

LoadedModel load_ensemble(const std::string& run_dir, Device device, const std::string& checkpoints) {
  std::vector<std::string> names;
  for (std::size_t start = 0;;) {
    const std::size_t comma = checkpoints.find(',', start);
    names.push_back(checkpoints.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (names.size() == 1) return load_trained_model(run_dir, device, checkpoints);
  for (const std::string& n : names) {
    QKGRAD_CHECK(!n.empty(), "--checkpoint ", checkpoints, ": an empty name in the list (write A,B: best, last or "
                 "checkpoint directories, separated by commas)");
  }
  LoadedModel ensemble = load_trained_model(run_dir, device, names[0]);
  for (std::size_t i = 1; i < names.size(); ++i) {
    LoadedModel member = load_trained_model(run_dir, device, names[i]);
    ensemble.checkpoint += "," + member.checkpoint;
    ensemble.others.push_back(std::move(member.model));
  }
  return ensemble;
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

}  // namespace qkgrad::translation
