#include "translate/subwords.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"

namespace qkgrad::translate {

namespace {

std::string join(const std::vector<std::string>& parts, const char* sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
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
  const std::string tmp_prefix = prefix + ".tmp-" + std::to_string(::getpid());
  const std::string args = cat(
      "--input=", join(o.text_files, ","), " --model_prefix=", tmp_prefix, " --vocab_size=", o.vocab_size,
      " --model_type=", o.model_type, " --character_coverage=1.0 --pad_id=0 --bos_id=1 --eos_id=2 --unk_id=3",
      " --input_sentence_size=2000000 --shuffle_input_sentence=true --num_threads=1 --minloglevel=2",
      " --max_sentence_length=8192");

  // Train in a child process: a fatal error inside SentencePiece must not take this program
  // down, and its message comes back through a pipe.
  int pipe_fds[2];
  QKGRAD_CHECK(::pipe(pipe_fds) == 0, "subwords: pipe failed: ", std::strerror(errno));
  std::fflush(nullptr);
  const pid_t child = ::fork();
  QKGRAD_CHECK(child >= 0, "subwords: fork failed: ", std::strerror(errno));
  if (child == 0) {
    ::close(pipe_fds[0]);
    // SentencePiece logs to stderr, even with --minloglevel; keep the terminal quiet.
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDERR_FILENO);
    sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(o.seed));
    const auto status = sentencepiece::SentencePieceTrainer::Train(args);
    if (!status.ok()) {
      const char* msg = status.error_message();
      [[maybe_unused]] ssize_t written = ::write(pipe_fds[1], msg, std::strlen(msg));
      ::_exit(1);
    }
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string message;
  char buf[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buf, sizeof buf)) > 0;) message.append(buf, static_cast<std::size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  if (!ok) {
    std::error_code ec;
    std::filesystem::remove(tmp_prefix + ".model", ec);
    std::filesystem::remove(tmp_prefix + ".vocab", ec);
    while (!message.empty() && (message.back() == '.' || message.back() == '\n' || message.back() == ' ')) message.pop_back();
    fail(cat("subwords: SentencePiece training failed",
             message.empty() ? (WIFSIGNALED(status) ? cat(" (it aborted with signal ", WTERMSIG(status), ")") : std::string())
                             : ": " + message,
             ". If the vocabulary is too large for this corpus, lower --vocab-size (now ", o.vocab_size, ")"));
  }
  // The vocabulary first: the model's presence is what says "trained" to the caller.
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

Subwords::Subwords(const std::string& model_path)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()), path_(model_path) {
  QKGRAD_CHECK(std::filesystem::is_regular_file(model_path), "subwords: model ", model_path, " does not exist");
  const auto status = sp_->Load(model_path);
  QKGRAD_CHECK(status.ok(), "subwords: cannot load ", model_path, ": ", status.error_message());
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

}  // namespace qkgrad::translate
