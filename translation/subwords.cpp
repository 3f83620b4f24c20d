#include "translation/subwords.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/hash.h"
#include "io/atomic_file.h"
#include "io/text.h"
#include "training/stop_signals.h"

namespace qkgrad::translation {

using training::StopSignals;

namespace {

// ---- the vocabulary's fingerprint ----
// A SentencePiece model is a protocol buffer (ModelProto): a sequence of records, each a key
// (field number << 3 | wire type) then a value. Debian ships no header for it, so the few
// records the fingerprint needs are read from the wire format directly.

struct WireRecord {
  uint64_t field;
  std::string_view value;   // a length-delimited field's payload, else the encoded number
  std::string_view record;  // key and value, as they are in the file
};

// The top-level records of one message; nullopt if the bytes are not a well-formed message.
std::optional<std::vector<WireRecord>> wire_records(std::string_view b) {
  std::size_t at = 0;
  auto varint = [&](uint64_t& out) {
    out = 0;
    for (int shift = 0; shift < 64 && at < b.size(); shift += 7) {
      const auto byte = static_cast<unsigned char>(b[at++]);
      out |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (byte < 0x80) return true;
    }
    return false;
  };
  std::vector<WireRecord> records;
  while (at < b.size()) {
    const std::size_t start = at;
    uint64_t key = 0, n = 0;
    if (!varint(key)) return std::nullopt;
    std::size_t value_start = at;
    switch (key & 7) {
      case 0: if (!varint(n)) return std::nullopt; break;                   // varint
      case 1: at += 8; break;                                                  // 64-bit
      case 5: at += 4; break;                                                  // 32-bit
      case 2:                                                                  // length-delimited
        if (!varint(n) || n > b.size() - at) return std::nullopt;
        value_start = at;
        at += n;
        break;
      default: return std::nullopt;
    }
    if (at > b.size()) return std::nullopt;
    records.push_back({key >> 3, b.substr(value_start, at - value_start), b.substr(start, at - start)});
  }
  return records;
}

// The hash of what encoding and decoding depend on (Subwords::fingerprint). ModelProto: 1 the
// pieces (text, score, type), 2 the trainer's settings, 3 the normaliser, 5 the denormaliser.
// Of the trainer's settings, only those the processor reads: 3 model type, 4 vocabulary size,
// 24 whitespace as suffix, 26 whitespace-only pieces, 35 byte fallback, 40-43 the special ids,
// 44 the unknown surface, 45-48 the special pieces (not 1 input, 2 model prefix, 16 threads,
// ...). Of a normaliser: 1 name, 2 the compiled rules, 3-5 the whitespace flags (not 6, the
// path of a rule file).
std::optional<uint64_t> vocabulary_hash(std::string_view model) {
  const auto top = wire_records(model);
  if (!top) return std::nullopt;
  auto kept = [](uint64_t field, std::initializer_list<uint64_t> wanted) {
    return std::find(wanted.begin(), wanted.end(), field) != wanted.end();
  };
  uint64_t hash = fnv1a("sentencepiece vocabulary v1");
  for (const WireRecord& r : *top) {
    if (r.field == 1) {
      hash = fnv1a(r.record, hash);
    } else if (r.field == 2 || r.field == 3 || r.field == 5) {
      const auto inner = wire_records(r.value);
      if (!inner) return std::nullopt;
      hash = fnv1a(r.record.substr(0, 1), hash);  // which message (its first key byte)
      for (const WireRecord& f : *inner) {
        const bool wanted = r.field == 2 ? kept(f.field, {3, 4, 24, 26, 35, 40, 41, 42, 43, 44, 45, 46, 47, 48})
                                         : kept(f.field, {1, 2, 3, 4, 5});
        if (wanted) hash = fnv1a(f.record, hash);
      }
    }
  }
  return hash;
}

// SentencePiece's advice names its own flags (--character_coverage) and limits below qkgrad's
// minimum vocabulary of 8; say instead what a qkgrad user can do.
std::string advice_for(const std::string& message, int vocab_size) {
  const std::size_t at = message.find("value <= ");
  if (at != std::string::npos) {
    const int most = std::atoi(message.c_str() + at + 9);
    if (most < 8) {
      return cat("This corpus supports at most ", most, " subword pieces, fewer than qkgrad's minimum vocabulary of 8 ",
                 "(--vocab-size): train on a larger corpus");
    }
    return cat("This corpus supports at most ", most, " pieces: lower --vocab-size (now ", vocab_size, ") to ", most,
               " or less, or train on a larger corpus");
  }
  const std::size_t chars = message.find("smaller than required_chars. ");
  if (chars != std::string::npos) {
    int have = 0, need = 0;
    if (std::sscanf(message.c_str() + chars + 29, "%d vs %d", &have, &need) == 2) {
      return cat("The corpus has ", need, " distinct characters and special pieces, each of which needs a piece: ",
                 "raise --vocab-size (now ", vocab_size, ") to at least ", need);
    }
  }
  return cat("if the vocabulary is too large for this corpus, lower --vocab-size (now ", vocab_size, ")");
}

// SentencePiece's own message, without its source location and trailing advice about its flags.
std::string trimmed(std::string message) {
  if (const std::size_t at = message.find(" Please set it"); at != std::string::npos) message.resize(at);
  if (const std::size_t at = message.find(" Increase vocab_size"); at != std::string::npos) message.resize(at);
  while (!message.empty() && (message.back() == '.' || message.back() == '\n' || message.back() == ' ')) message.pop_back();
  return message;
}

// Waits for the child to end, through signals that interrupt the wait; returns its status.
int reap(pid_t child) {
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// After a stop signal: SentencePiece is stopped (or already died of the same signal, which the
// terminal sends to the whole process group), `cleanup` runs, and Interrupted is thrown.
// `child` is 0 when it has been reaped already (its pid may belong to another process by now).
[[noreturn]] void stop_child(pid_t child, const std::function<void()>& cleanup) {
  if (child > 0) {
    ::kill(child, SIGKILL);
    reap(child);
  }
  cleanup();
  StopSignals::throw_if_received("training the subwords", "SentencePiece was stopped and its files removed");
  fail("subwords: stop_child without a stop signal");  // not reached
}

// Reads the child's message until it closes the pipe, checking for a stop signal every 100 ms.
std::string read_child_message(int fd, pid_t child, const std::function<void()>& cleanup) {
  std::string message;
  char buf[512];
  for (;;) {
    if (StopSignals::received() != 0) {
      ::close(fd);
      stop_child(child, cleanup);
    }
    struct pollfd p {fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready <= 0) continue;  // a time-out, or EINTR (a signal: checked above)
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    message.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return message;
}

}  // namespace

namespace {

// SentencePiece's command line for `o`, writing PREFIX.model and PREFIX.vocab.
std::string sentencepiece_arguments(const SubwordTraining& o, const std::string& prefix) {
  return cat("--input=", join(o.text_files, ","), " --model_prefix=", prefix, " --vocab_size=", o.vocab_size,
             " --model_type=", o.model_type, " --character_coverage=1.0 --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3",
             " --input_sentence_size=2000000 --shuffle_input_sentence=true --num_threads=1 --minloglevel=2",
             " --max_sentence_length=8192");
}

// The child process: trains, and on failure writes SentencePiece's message to `message_fd`.
[[noreturn]] void train_in_child(pid_t parent, int message_fd, const std::string& args, uint64_t seed) {
  // Dies with its parent (a SIGKILL of the trainer must not leave it writing files), and takes
  // stop signals with their default effect.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(sig, SIG_DFL);
  StopSignals::unblock_in_child();
  // SentencePiece logs to stderr, even with --minloglevel; keep the terminal quiet.
  const int null_fd = ::open("/dev/null", O_WRONLY);
  if (null_fd >= 0) ::dup2(null_fd, STDERR_FILENO);
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(seed));
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) {
    const char* msg = status.error_message();
    [[maybe_unused]] ssize_t written = ::write(message_fd, msg, std::strlen(msg));
    ::_exit(1);
  }
  ::_exit(0);
}

// Renames TMP.vocab and TMP.model to PREFIX.*: the vocabulary first, as the model's presence is
// what says "trained" to the caller.
void install_trained(const std::string& tmp_prefix, const std::string& prefix) {
  for (const char* ext : {".vocab", ".model"}) {
    std::error_code ec;
    std::filesystem::rename(tmp_prefix + ext, prefix + ext, ec);
    if (ec) {
      std::filesystem::remove(tmp_prefix + ".model", ec);
      std::filesystem::remove(tmp_prefix + ".vocab", ec);
      fail(cat("subwords: cannot rename ", tmp_prefix, ext, " to ", prefix, ext, ": ", ec.message()));
    }
  }
}

}  // namespace

void Subwords::train(const SubwordTraining& o) {
  QKGRAD_CHECK(!o.text_files.empty(), "subwords: no training text given");
  QKGRAD_CHECK(o.vocab_size >= 8, "subwords: the vocabulary size must be at least 8, got ", o.vocab_size);
  for (const std::string& f : o.text_files) {
    QKGRAD_CHECK(std::filesystem::is_regular_file(f), "subwords: training text ", f, " does not exist");
  }
  std::string prefix = o.model_path;
  if (prefix.size() > 6 && prefix.compare(prefix.size() - 6, 6, ".model") == 0) prefix.resize(prefix.size() - 6);
  // PREFIX.tmp-PID.{model,vocab} of trainers killed (SIGKILL) while SentencePiece wrote them.
  const std::filesystem::path prefix_path(prefix);
  remove_leftovers_of_dead_processes(prefix_path.parent_path().empty() ? "." : prefix_path.parent_path().string(),
                                     prefix_path.filename().string() + ".tmp-", {".model", ".vocab"});
  const std::string tmp_prefix = prefix + ".tmp-" + std::to_string(::getpid());
  const std::string args = sentencepiece_arguments(o, tmp_prefix);

  // Train in a child process: a fatal error inside SentencePiece must not take this program
  // down, and its message comes back through a pipe.
  int pipe_fds[2];
  QKGRAD_CHECK(::pipe(pipe_fds) == 0, "subwords: pipe failed: ", std::strerror(errno));
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  QKGRAD_CHECK(child >= 0, "subwords: fork failed: ", std::strerror(errno));
  if (child == 0) {
    ::close(pipe_fds[0]);
    train_in_child(parent, pipe_fds[1], args, o.seed);
  }
  ::close(pipe_fds[1]);
  auto remove_temporaries = [&] {
    std::error_code ec;
    std::filesystem::remove(tmp_prefix + ".model", ec);
    std::filesystem::remove(tmp_prefix + ".vocab", ec);
  };
  const std::string message = read_child_message(pipe_fds[0], child, remove_temporaries);
  const int status = reap(child);
  if (StopSignals::received() != 0) stop_child(0, remove_temporaries);  // it may have died of the signal first
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    remove_temporaries();
    fail(cat("subwords: SentencePiece training failed",
             message.empty() ? (WIFSIGNALED(status) ? cat(" (it aborted with signal ", WTERMSIG(status), ")") : std::string())
                             : ": " + trimmed(message),
             ". ", advice_for(message, o.vocab_size)));
  }
  install_trained(tmp_prefix, prefix);
}

Subwords::Subwords(const std::string& model_path)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), path_(model_path) {
  QKGRAD_CHECK(std::filesystem::is_regular_file(model_path), "subwords: model ", model_path, " does not exist");
  const std::string bytes = read_file(model_path, std::size_t{1} << 30);
  file_fingerprint_ = "fnv1a64:" + hex64(fnv1a(bytes));
  const auto status = sp_->LoadFromSerializedProto(bytes);
  QKGRAD_CHECK(status.ok(), "subwords: cannot load ", model_path, ": ", status.error_message());
  const std::optional<uint64_t> hash = vocabulary_hash(bytes);
  QKGRAD_CHECK(hash.has_value(), "subwords: ", model_path, " is not a well-formed SentencePiece model file");
  fingerprint_ = "spm-fnv1a64:" + hex64(*hash);
  QKGRAD_CHECK(sp_->pad_id() == pad_id && sp_->bos_id() == bos_id && sp_->eos_id() == eos_id && sp_->unk_id() == unk_id,
               "subwords: ", model_path, " uses other special ids (pad ", sp_->pad_id(), ", bos ", sp_->bos_id(),
               ", eos ", sp_->eos_id(), ", unk ", sp_->unk_id(), "); qkgrad expects 0, 1, 2, 3");
}

Subwords::~Subwords() = default;

std::vector<int64_t> Subwords::encode(const std::string& text) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  QKGRAD_CHECK(status.ok(), "subwords: cannot encode a line: ", status.error_message());
  return std::vector<int64_t>(ids.begin(), ids.end());
}

std::string Subwords::decode(const std::vector<int64_t>& ids) const {
  std::vector<int> kept;
  for (int64_t id : ids) {
    if (id != pad_id && id != bos_id && id != eos_id && id >= 0 && id < vocab_size()) kept.push_back(static_cast<int>(id));
  }
  std::string text;
  const auto status = sp_->Decode(kept, &text);
  QKGRAD_CHECK(status.ok(), "subwords: cannot decode: ", status.error_message());
  return text;
}

std::vector<std::string> Subwords::pieces(const std::string& text) const {
  std::vector<std::string> out;
  const auto status = sp_->Encode(text, &out);
  QKGRAD_CHECK(status.ok(), "subwords: cannot encode a line: ", status.error_message());
  return out;
}

std::string Subwords::piece(int64_t id) const {
  QKGRAD_CHECK(id >= 0 && id < vocab_size(), "subwords: id ", id, " is outside the vocabulary [0, ", vocab_size(), ")");
  return sp_->IdToPiece(static_cast<int>(id));
}

int64_t Subwords::vocab_size() const { return sp_->GetPieceSize(); }

}  // namespace qkgrad::translation
