// Reliability (issue 8): bad input never crashes, hangs or leaves half-written output; checkpoints
// survive SIGKILL during a save and a full disk; --resume after SIGKILL is bit-identical to an
// uninterrupted run. Every run of qkgrad-translate here is checked for its exit status, its
// message (which file/line/option, and what to do) and for not dying by a signal or hanging.
#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/autograd.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "nn/transformer.h"
#include "reliability_helpers.h"
#include "translation/corpus.h"

using namespace qkgrad;
using namespace qkgrad::test_cli;
using Catch::Matchers::Contains;

extern char** environ;

namespace {

// ---- safetensors surgery ----

struct StFile {
  uint64_t header_length = 0;
  std::string header, data;  // the JSON text (with its padding) and the data section
};
StFile split_safetensors(const std::string& bytes) {
  StFile f;
  std::memcpy(&f.header_length, bytes.data(), 8);
  f.header = bytes.substr(8, f.header_length);
  f.data = bytes.substr(8 + f.header_length);
  return f;
}
std::string join_safetensors(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header + data;
}
// The file with its last tensor (by offset) claiming 8 more bytes than the data section has.
std::string claiming_more_data(const std::string& bytes) {
  const StFile f = split_safetensors(bytes);
  Json header = parse_json(f.header, "header");
  std::string last;
  int64_t last_end = -1;
  for (const auto& [name, info] : header.items()) {
    if (name != "__metadata__" && info.at("data_offsets")[1].get<int64_t>() > last_end) {
      last_end = info.at("data_offsets")[1].get<int64_t>();
      last = name;
    }
  }
  header[last]["data_offsets"][1] = last_end + 8;
  return join_safetensors(dump_json(header), f.data);
}

bool all_equal(const Tensor& t, float value) {
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (p[i] != value) return false;
  }
  return true;
}

TransformerConfig saver_config() {
  TransformerConfig c;
  c.vocab = 2000;
  c.d_model = 64;
  c.heads = 2;
  c.ffn = 128;
  c.encoder_layers = c.decoder_layers = 1;
  c.qknorm_length = 10;
  c.seed = 3;
  return c;
}

// Every parameter and every optimizer tensor holds `k`, and the trainer's step is k: a checkpoint
// whose files come from different saves could not pass this.
void fill_model(Seq2SeqTransformer& model, float k) {
  NoGradGuard no_grad;
  for (const auto& [name, p] : model.named_parameters()) {
    Tensor t = p;
    t.fill_(k);
  }
}
TrainerState saver_state(const Seq2SeqTransformer& model, int64_t k) {
  TrainerState t;
  for (const auto& [name, p] : model.named_parameters()) {
    t.optimizer_state.emplace_back("exp_avg." + name, Tensor::full(p.shape(), static_cast<double>(k)));
    t.optimizer_state.emplace_back("exp_avg_sq." + name, Tensor::full(p.shape(), static_cast<double>(k)));
  }
  t.set_int("step", k);
  return t;
}
// Loads DIR completely and checks it is one save, of step k; returns k.
int64_t check_saver_checkpoint(const std::string& dir) {
  REQUIRE(checkpoint_exists(dir));
  Seq2SeqTransformer model(load_checkpoint_config(dir));
  load_model_weights(dir, model);
  const TrainerState t = load_trainer_state(dir);
  const int64_t k = t.get_int("step");
  for (const auto& [name, p] : model.named_parameters()) {
    INFO(name << " in the checkpoint of step " << k);
    REQUIRE(all_equal(p, static_cast<float>(k)));
  }
  for (const auto& [name, tensor] : t.optimizer_state) {
    INFO(name << " in the checkpoint of step " << k);
    REQUIRE(all_equal(tensor, static_cast<float>(k)));
  }
  return k;
}

// ---- a small tmpfs, visible to this process and its children only ----

struct SmallTmpfs {
  std::string dir, failure;
  bool mounted = false;
  SmallTmpfs(const std::string& at, uint64_t bytes) : dir(at) {
    fs::create_directories(dir);
    failure = private_mounts();
    if (failure.empty()) {
      mounted = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, cat("size=", bytes).c_str()) == 0;
      if (!mounted) failure = cat("mount -t tmpfs: ", std::strerror(errno));
    }
  }
  void resize(uint64_t bytes) {
    REQUIRE(::mount("tmpfs", dir.c_str(), "tmpfs", MS_REMOUNT, cat("size=", bytes).c_str()) == 0);
  }
  uint64_t used() const {
    struct statvfs s {};
    REQUIRE(::statvfs(dir.c_str(), &s) == 0);
    return static_cast<uint64_t>(s.f_blocks - s.f_bfree) * s.f_frsize;
  }
  ~SmallTmpfs() {
    if (mounted) ::umount2(dir.c_str(), MNT_DETACH);
  }
};

// RLIMIT_FSIZE for this process, with SIGXFSZ ignored (writes past it fail with EFBIG).
struct FileSizeLimit {
  struct rlimit old {};
  void (*old_handler)(int) = nullptr;
  explicit FileSizeLimit(uint64_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old);
    old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit limit = old;
    limit.rlim_cur = static_cast<rlim_t>(bytes);
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old);
    ::signal(SIGXFSZ, old_handler);
  }
};

}  // namespace

// =============================== the input battery ===============================

TEST_CASE("reliability: missing and unreadable files are named, and nothing is created", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 20);
  fs::remove(data + "/dev.en");
  expect_exit(qk(train_args(data, run, 2)), 1, {"cannot open '" + data + "/dev.en': No such file or directory"});
  CHECK_FALSE(exists(run));

  write(tmp / "in.txt", "uno dos\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "missing.txt", "--output", tmp / "out.txt"}), 1,
              {"cannot open '" + tmp / "missing.txt" + "': No such file or directory"});
  CHECK_FALSE(exists(tmp / "out.txt"));
  expect_exit(qk({"translate", "--run", tmp / "no-run", "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
              {"run directory " + tmp / "no-run" + " does not exist (train a model first"});
  CHECK_FALSE(exists(tmp / "out.txt"));
  expect_exit(qk({"eval", "--run", tmp / "no-run"}), 1, {"run directory " + tmp / "no-run" + " does not exist"});
  expect_exit(qk({"bleu", "--ref", tmp / "missing.txt", "--hyp", tmp / "in.txt"}), 1, {"missing.txt': No such file"});

  // A directory where a file belongs.
  write_corpus(data, 20);
  fs::remove(data + "/train.es");
  fs::create_directory(data + "/train.es");
  expect_exit(qk(train_args(data, run, 2)), 1, {data + "/train.es' is not a regular file"});
  CHECK_FALSE(exists(run));

  // Unreadable: chmod 000 does not stop root, so as root the program runs as nobody.
  if (running_as_root() && ::system("command -v setpriv > /dev/null 2>&1") != 0) {
    WARN("running as root without setpriv: the unreadable-file case cannot be tested here");
    return;
  }
  fs::remove(data + "/train.es");
  write_corpus(data, 20);
  fs::permissions(data + "/train.es", fs::perms::none);
  fs::permissions(tmp.path, fs::perms::all);  // nobody may create the run directory, and read the rest
  fs::permissions(data, fs::perms::all);
  for (const char* f : {"train.en", "dev.es", "dev.en"}) fs::permissions(data + "/" + f, fs::perms::all);
  Command c{train_args(data, run, 2)};
  c.as_nobody = true;
  expect_exit(run_command(c), 1, {"cannot open '" + data + "/train.es': Permission denied; check the path and its permissions"});
  CHECK_FALSE(exists(run));
  c.args = {"bleu", "--ref", data + "/train.es", "--hyp", data + "/train.en"};
  expect_exit(run_command(c), 1, {"train.es': Permission denied"});
}

TEST_CASE("reliability: an empty corpus, or one of blank lines, is refused before anything is written", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 20);
  write(data + "/train.es", "");
  write(data + "/train.en", "");
  expect_exit(qk(train_args(data, run, 2)), 1,
              {"empty corpus: " + data + "/train.es and " + data + "/train.en have no usable line pairs"});
  CHECK_FALSE(exists(run));
  write(data + "/train.es", " \n\t\n  \t \n");
  write(data + "/train.en", "\n\n\n");
  expect_exit(qk(train_args(data, run, 2)), 1, {"no usable line pairs (0 pairs (dropped: 3 with an empty side"});
  CHECK_FALSE(exists(run));
  // A run directory that existed (empty) is left as it was: existing, and empty.
  fs::create_directories(run);
  expect_exit(qk(train_args(data, run, 2)), 1, {"empty corpus"});
  CHECK(fs::is_directory(run));
  CHECK(fs::is_empty(run));

  // translate: an empty input gives an empty output.
  write(tmp / "empty.txt", "");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "empty.txt", "--output", tmp / "out.txt"}), 0, {});
  CHECK(exists(tmp / "out.txt"));
  CHECK(read(tmp / "out.txt").empty());
}

TEST_CASE("reliability: source and target with different line counts", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "nested/run";
  fs::create_directories(data);
  write_corpus(data, 20);
  write(data + "/train.es", read(data + "/train.es") + "uno\n");
  expect_exit(qk(train_args(data, run, 2)), 1,
              {"misaligned corpus: " + data + "/train.es has 21 lines but " + data + "/train.en has 20",
               "line i of one must translate line i of the other"});
  CHECK_FALSE(exists(tmp / "nested"));
  write_corpus(data, 20);
  write(data + "/dev.en", "one\n");
  expect_exit(qk(train_args(data, run, 2)), 1, {data + "/dev.es has 20 lines but " + data + "/dev.en has 1"});
  CHECK_FALSE(exists(tmp / "nested"));
}

TEST_CASE("reliability: invalid UTF-8 names the file, line and byte", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 20);
  write(data + "/train.en", "one one\ntwo \xc3\x28 two\n" + read(data + "/train.en").substr(16));
  expect_exit(qk(train_args(data, run, 2)), 1,
              {data + "/train.en:2: invalid UTF-8 at byte 5 of the line; convert the file to UTF-8"});
  CHECK_FALSE(exists(run));

  write(tmp / "bad.txt", "uno dos\n\xff\xfe tres\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "bad.txt", "--output", tmp / "out.txt"}), 1,
              {tmp / "bad.txt" + ":2: invalid UTF-8 at byte 1"});
  CHECK_FALSE(exists(tmp / "out.txt"));
  Command c{{"translate", "--run", trained().run, "--output", tmp / "out.txt"}};
  c.stdin_path = tmp / "bad.txt";
  expect_exit(run_command(c), 1, {"<stdin>:2: invalid UTF-8 at byte 1"});
  CHECK_FALSE(exists(tmp / "out.txt"));
}

TEST_CASE("reliability: NUL bytes are refused, in files and on stdin", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 20);
  write(data + "/train.es", read(data + "/train.es") + std::string("uno\0dos\n", 8));
  write(data + "/train.en", read(data + "/train.en") + "one two\n");
  expect_exit(qk(train_args(data, run, 2)), 1, {data + "/train.es:21: contains a NUL byte; this is not a text file"});
  CHECK_FALSE(exists(run));

  write(tmp / "nul.txt", std::string("uno\0dos\n", 8));
  write(tmp / "out.txt", "the previous output\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "nul.txt", "--output", tmp / "out.txt"}), 1,
              {tmp / "nul.txt" + ":1: contains a NUL byte"});
  CHECK(read(tmp / "out.txt") == "the previous output\n");  // untouched
  Command c{{"translate", "--run", trained().run}};
  c.stdin_path = tmp / "nul.txt";
  expect_exit(run_command(c), 1, {"<stdin>:1: contains a NUL byte"});
  c.args = {"bleu", "--ref", tmp / "out.txt"};
  expect_exit(run_command(c), 1, {"<stdin>:1: contains a NUL byte"});
}

TEST_CASE("reliability: a 1 MB line", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 400);
  std::string huge;
  while (huge.size() < (std::size_t{1} << 20)) huge += "uno dos tres ";
  huge.resize(std::size_t{1} << 20);
  write(data + "/train.es", read(data + "/train.es") + huge + "\n");
  write(data + "/train.en", read(data + "/train.en") + "one\n");
  // Training drops the pair (over the length limit) and says so; the subwords never see it.
  expect_exit(qk(train_args(data, run, 2)), 0, {"train 400 pairs (dropped: 0 with an empty side, 1 over the length limit)"});
  CHECK(read(run + "/subwords.vocab") == read(trained().run + "/subwords.vocab"));

  // Translating all of it would need an attention matrix of ~10^11 entries: it is cropped to
  // --max-length subwords (as Marian's --max-length-crop), counted, and every line is answered.
  write(tmp / "in.txt", "uno dos\n" + huge + "\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "in.txt", "--output", tmp / "out.txt",
                  "--max-length", "64"}), 0,
              {"cropped 1 line longer than --max-length 64 subwords to that length (the first: " + tmp / "in.txt" + ":2)"});
  CHECK(qkgrad::translation::read_text_lines(tmp / "out.txt").size() == 2);
  // BLEU of a 1 MB line against itself.
  write(tmp / "ref.txt", huge + "\n");
  expect_exit(qk({"bleu", "--ref", tmp / "ref.txt", "--hyp", tmp / "ref.txt"}), 0, {" = 100.00 100.0/"});
}

TEST_CASE("reliability: CRLF line endings read like LF", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 400);
  for (const char* f : {"train.es", "train.en", "dev.es", "dev.en"}) {
    std::string text = read(data + "/" + f), crlf;
    for (char ch : text) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
    write(data + "/" + f, crlf);
  }
  expect_exit(qk(train_args(data, run, 2)), 0, {"train 400 pairs (dropped: 0 with an empty side, 0 over"});
  const std::string vocab = read(run + "/subwords.vocab");
  CHECK_FALSE(has(vocab, "\r"));
  CHECK(vocab == read(trained().run + "/subwords.vocab"));  // the same subwords as from LF files

  write(tmp / "lf.txt", "uno dos\ntres cuatro\n");
  write(tmp / "crlf.txt", "uno dos\r\ntres cuatro\r\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "lf.txt", "--output", tmp / "lf.out"}), 0, {});
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "crlf.txt", "--output", tmp / "crlf.out"}), 0, {});
  CHECK(read(tmp / "crlf.out") == read(tmp / "lf.out"));
  CHECK_FALSE(has(read(tmp / "crlf.out"), "\r"));
}

TEST_CASE("reliability: tabs and runs of spaces are normalised", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 400);
  for (const char* f : {"train.es", "train.en"}) {
    std::string text = read(data + "/" + f), tabbed;
    for (char ch : text) tabbed += ch == ' ' ? std::string("\t \t") : ch == '\n' ? std::string("\t\n") : std::string(1, ch);
    write(data + "/" + f, "\t" + tabbed);
  }
  expect_exit(qk(train_args(data, run, 2)), 0, {"train 400 pairs (dropped: 0 with an empty side, 0 over"});
  const std::string vocab = read(run + "/subwords.vocab");
  CHECK(vocab == read(trained().run + "/subwords.vocab"));
  for (std::size_t start = 0, end; (end = vocab.find('\n', start)) != std::string::npos; start = end + 1) {
    const std::string line = vocab.substr(start, end - start);  // "piece<TAB>score"
    CHECK(std::count(line.begin(), line.end(), '\t') == 1);
  }
  write(tmp / "spaces.txt", "uno dos\n");
  write(tmp / "tabs.txt", "\tuno\t\t dos \t\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "spaces.txt", "--output", tmp / "a.out"}), 0, {});
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "tabs.txt", "--output", tmp / "b.out"}), 0, {});
  CHECK(read(tmp / "a.out") == read(tmp / "b.out"));
}

TEST_CASE("reliability: whitespace-only lines are dropped in pairs and kept in place when translating", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 400);
  write(data + "/train.es", read(data + "/train.es") + " \t \nuno\n\t\n");
  write(data + "/train.en", read(data + "/train.en") + "one\n   \n \n");
  expect_exit(qk(train_args(data, run, 2)), 0, {"train 400 pairs (dropped: 3 with an empty side, 0 over"});

  write(tmp / "in.txt", "uno dos\n \t \ntres cuatro\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 0, {});
  const std::string out = read(tmp / "out.txt");
  REQUIRE(std::count(out.begin(), out.end(), '\n') == 3);
  CHECK(has(out, "\n\n"));  // the blank line translates to a blank line, in its place
  CHECK(out.front() != '\n');
}

TEST_CASE("reliability: a vocabulary larger than the corpus supports", "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "a/b/run";
  fs::create_directories(data);
  write_corpus(data, 50);
  std::vector<std::string> args = train_args(data, run, 2);
  args.push_back("--vocab-size");
  args.push_back("5000");
  expect_exit(qk(args), 1, {"Vocabulary size too high (5000)", "lower --vocab-size (now 5000)"});
  CHECK_FALSE(exists(tmp / "a"));  // the directories it created are gone again
  CHECK(entries_containing(tmp.path, "subword").empty());
}

TEST_CASE("reliability: a new run over an attempt that died before its first checkpoint starts over cleanly",
          "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  fs::remove_all(run + "/checkpoints");  // as if killed before the first save of checkpoints/last
  write(run + "/metrics.jsonl", "{\"step\":1000,\"train_loss\":9}\n{\"step\":1050,\"tra");
  expect_exit(qk(train_args(trained().data, run, 2)), 0,
              {run + " holds an earlier attempt that never saved a checkpoint; starting over (keeping its subwords"});
  const std::string metrics = read(run + "/metrics.jsonl");
  CHECK_FALSE(has(metrics, "1000"));  // not appended to the dead attempt's metrics
  CHECK(has(metrics, "{\"step\":2,\"dev_loss\""));
  CHECK(checkpoint_step(run + "/checkpoints/last") == 2);
}

TEST_CASE("reliability: a metrics line cut short by a kill does not stop --resume; a damaged one is named", "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  const std::string metrics = read(run + "/metrics.jsonl");
  std::vector<std::string> resume = train_args(trained().data, run, 22);
  resume.push_back("--resume");
  write(run + "/metrics.jsonl", metrics + "{\"step\":21,\"tra");
  expect_exit(qk(resume), 0, {"resumed from " + run + "/checkpoints/last at step 20",
                              "dropped a half-written last line of " + run + "/metrics.jsonl"});
  CHECK(read(run + "/metrics.jsonl").rfind(metrics, 0) == 0);
  CHECK_FALSE(has(read(run + "/metrics.jsonl"), "{\"step\":21,\"tra"));
  write(run + "/metrics.jsonl", "{\"step\":1}\n{\"step\":2,,}\n" + metrics);
  resume = train_args(trained().data, run, 24);
  resume.push_back("--resume");
  expect_exit(qk(resume), 1, {run + "/metrics.jsonl:2:", "is damaged: delete line 2"});
  CHECK(checkpoint_step(run + "/checkpoints/last") == 22);
}

TEST_CASE("reliability: command-line values out of range are usage errors (status 2), before anything is written",
          "[reliability]") {
  TempDir tmp;
  const std::string data = tmp / "data", run = tmp / "run";
  fs::create_directories(data);
  write_corpus(data, 20);
  write(tmp / "in.txt", "uno\n");
  const std::string R = trained().run;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"translate", "--run", R, "--beam", "-1"}, "--beam: must be between 1 and 64, got -1"},
      {{"translate", "--run", R, "--beam", "0"}, "--beam: must be between 1 and 64, got 0"},
      {{"translate", "--run", R, "--beam"}, "--beam: 1 required N missing"},
      {{"translate", "--run", R, "--beam", "four"}, "--beam: needs an integer, got 'four'"},
      {{"translate", "--run", R, "--alpha", "nan"}, "--alpha: needs a number, got 'nan'"},
      {{"translate", "--run", R, "--greedy=yes"}, "greedy was given a disallowed flag override"},
      {{"translate", "--run", R, "--max-length", "0"}, "--max-length: must be between 1 and 100000, got 0"},
      {{"translate", "--run", R, "--colour", "blue"}, "were not expected: blue --colour (see --help)"},
      {{"translate", "--input", tmp / "in.txt"}, "--run is required (see --help)"},
      {{"eval", "--run", R, "--beam", "-3"}, "--beam: must be between 1 and 64, got -3"},
      {{"train", "--data", data, "--run", run, "--batch-tokens", "0"}, "--batch-tokens: must be between 16 and 10000000, got 0"},
      {{"train", "--data", data, "--run", run, "--max-steps", "0"}, "--max-steps: must be between 1 and"},
      {{"train", "--data", data, "--run", run, "--max-steps", "99999999999999999999"}, "--max-steps: must be between 1 and"},
      {{"train", "--data", data, "--run", run, "--threads", "-2"}, "--threads: must be between 1 and 4096, got -2"},
      {{"train", "--data", data, "--run", run, "--vocab-size", "7"}, "--vocab-size: must be between 8 and"},
      {{"train", "--data", data, "--run", run, "--lr", "-0.1"}, "--lr: must be between"},
      {{"train", "--data", data, "--run", run, "--dropout", "1"}, "--dropout: must be between 0 and 0.99, got 1"},
      {{"train", "--data", data, "--run", run, "--save-every", "-1"}, "--save-every: must be between 0 and"},
      {{"train", "--data", data, "--run", run, "--preset", "huge"}, "--preset: must be one of tiny|demo|small|paper, got 'huge'"},
      {{"train", "--data", data, "--run", run, "--d-model", "30", "--heads", "4"},
       "the model width (--d-model, 30) must be divisible by the number of heads (--heads, 4)"},
      {{"train", "--data", data, "--run", run, "extra"}, "The following argument was not expected: extra (see --help)"},
      {{"train", "--run", run}, "--data is required for a new run"},
      {{"train", "--data", data, "--run", run, "--colour", "blue"}, "were not expected: blue --colour (see --help)"},
  };
  for (const auto& [args, message] : cases) {
    std::vector<std::string> a = args;
    if (a[0] == "translate") a.insert(a.begin() + 1, {"--output", tmp / "out.txt"});
    expect_exit(qk(a), 2, {message});
    CHECK_FALSE(exists(run));
    CHECK_FALSE(exists(tmp / "out.txt"));
  }
}

// =============================== damaged checkpoints ===============================

TEST_CASE("reliability: checkpoints truncated at 10 random offsets give clear errors", "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  const std::string ckpt = run + "/checkpoints/last";
  const TransformerConfig config = load_checkpoint_config(ckpt);
  std::mt19937_64 rng(8);
  // Through the API: every file of the checkpoint.
  for (const char* name : {"config.json", "model.safetensors", "trainer.safetensors"}) {
    const std::string path = ckpt + "/" + name, original = read(path);
    // (config.json less its final "}\n" is no longer JSON; cutting only the newline keeps it valid.)
    std::uniform_int_distribution<std::size_t> offset(0, original.size() - 2);
    for (int i = 0; i < 10; ++i) {
      const std::size_t at = offset(rng);
      write(path, original.substr(0, at));
      INFO(name << " truncated to " << at << " of " << original.size() << " bytes");
      try {
        Seq2SeqTransformer model(config);
        load_model_weights(ckpt, model);
        (void)load_trainer_state(ckpt);
        FAIL("a truncated checkpoint loaded");
      } catch (const Error& e) {
        CHECK_THAT(e.what(), Contains(name));
      }
    }
    write(path, original);
  }
  // Through the program: translate (best) and train --resume (last); no output is written.
  write(tmp / "in.txt", "uno dos\n");
  const std::string best = run + "/checkpoints/best/model.safetensors", original = read(best);
  std::uniform_int_distribution<std::size_t> offset(0, original.size() - 1);
  for (int i = 0; i < 10; ++i) {
    const std::size_t at = offset(rng);
    write(best, original.substr(0, at));
    INFO("best/model.safetensors truncated to " << at << " of " << original.size() << " bytes");
    expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
                {"cannot load checkpoint " + run + "/checkpoints/best: ", best, "truncated",
                 "if " + run + "/checkpoints/last is intact, move " + run + "/checkpoints/best away to use it"});
    CHECK_FALSE(exists(tmp / "out.txt"));
  }
  expect_exit(qk({"eval", "--run", run}), 1, {"cannot load checkpoint", "truncated"});
  CHECK_FALSE(exists(run + "/test.hyp"));
  // The advice works.
  fs::rename(run + "/checkpoints/best", tmp / "damaged-best");
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 0, {});
  CHECK(exists(tmp / "out.txt"));

  const std::string trainer = ckpt + "/trainer.safetensors", trainer_bytes = read(trainer);
  write(trainer, trainer_bytes.substr(0, trainer_bytes.size() / 2));
  std::vector<std::string> resume = train_args(trained().data, run, 30);
  resume.push_back("--resume");
  expect_exit(qk(resume), 1, {"train --resume: cannot continue from " + ckpt, trainer, "truncated"});
  CHECK(read(trainer).size() == trainer_bytes.size() / 2);  // nothing was saved over it
}

TEST_CASE("reliability: every flipped header byte of a checkpoint gives a clear error or a valid load", "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  const std::string ckpt = run + "/checkpoints/best", path = ckpt + "/model.safetensors", original = read(path);
  const StFile st = split_safetensors(original);
  Seq2SeqTransformer model(load_checkpoint_config(ckpt));
  int errors = 0, loads = 0;
  // The byte is changed in place (rewriting the whole file thousands of times makes ext4 flush
  // it to disk each time).
  auto poke = [&](std::size_t offset, char value) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::pwrite(fd, &value, 1, static_cast<off_t>(offset)) == 1);
    ::close(fd);
  };
  for (std::size_t i = 0; i < 8 + st.header_length; ++i) {
    poke(i, static_cast<char>(original[i] ^ (1 << (i % 8))));
    INFO("byte " << i << " flipped");
    try {
      load_model_weights(ckpt, model);
      ++loads;  // e.g. a flip inside the "kind" metadata, which loading does not use
    } catch (const Error& e) {
      ++errors;
      CHECK_THAT(e.what(), Contains(path));
    }
    poke(i, original[i]);
  }
  REQUIRE(read(path) == original);
  CHECK(errors > 0);
  CHECK(loads * 20 < errors);  // nearly every flip is caught
  // Through the program: a flip in the length field and one in the JSON.
  write(tmp / "in.txt", "uno dos\n");
  for (std::size_t i : {std::size_t{3}, std::size_t{8}, std::size_t{8 + st.header_length / 2}}) {
    std::string bytes = original;
    bytes[i] = static_cast<char>(bytes[i] ^ 0x10);
    write(path, bytes);
    INFO("byte " << i << " flipped");
    expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
                {"cannot load checkpoint " + ckpt, path});
    CHECK_FALSE(exists(tmp / "out.txt"));
  }
}

TEST_CASE("reliability: a checkpoint whose header claims more data than the file has", "[reliability]") {
  TempDir tmp;
  const std::string run = copy_of_trained_run(tmp / "run");
  const std::string ckpt = run + "/checkpoints/best", path = ckpt + "/model.safetensors", original = read(path);
  write(tmp / "in.txt", "uno dos\n");
  // The header length says more than the file holds.
  std::string bytes = original;
  const uint64_t claimed = original.size();
  std::memcpy(bytes.data(), &claimed, 8);
  write(path, bytes);
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
              {path, "the header length says " + std::to_string(claimed) + " bytes but only"});
  CHECK_FALSE(exists(tmp / "out.txt"));
  // A tensor's data_offsets reach past the end of the data section.
  write(path, claiming_more_data(original));
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
              {path, "but the data section has only " + std::to_string(split_safetensors(original).data.size()) + " bytes"});
  CHECK_FALSE(exists(tmp / "out.txt"));
  Seq2SeqTransformer model(load_checkpoint_config(ckpt));
  CHECK_THROWS_WITH(load_model_weights(ckpt, model), Contains("the data section has only"));
}

TEST_CASE("reliability: a checkpoint for another model size is refused, naming both sizes", "[reliability]") {
  TempDir tmp;
  // Through the API.
  TransformerConfig small = saver_config(), wide = saver_config();
  small.vocab = wide.vocab = 20;
  wide.d_model = 32;
  Seq2SeqTransformer a(small), b(wide);
  save_checkpoint(tmp / "ckpt", a, nullptr);
  CHECK_THROWS_WITH(load_model_weights(tmp / "ckpt", b),
                    Contains("the checkpoint does not fit this model: d_model 64 vs 32"));
  // Through the program: a run whose checkpoints come from a run of another size.
  const std::string run = copy_of_trained_run(tmp / "run");
  std::vector<std::string> other = train_args(trained().data, tmp / "other", 2);
  for (const char* extra : {"--d-model", "64", "--vocab-size", "28"}) other.push_back(extra);
  expect_exit(qk(other), 0, {});
  fs::remove_all(run + "/checkpoints/last");
  fs::copy(tmp / "other/checkpoints/last", run + "/checkpoints/last", fs::copy_options::recursive);
  std::vector<std::string> resume = train_args(trained().data, run, 30);
  resume.push_back("--resume");
  expect_exit(qk(resume), 1,
              {"train --resume: cannot continue from " + run + "/checkpoints/last", "vocab 28 vs 30",
               "subword vocabulary", "d_model 64 vs", "resume with the options the run was started with"});
  fs::remove_all(run + "/checkpoints/best");
  fs::copy(tmp / "other/checkpoints/best", run + "/checkpoints/best", fs::copy_options::recursive);
  write(tmp / "in.txt", "uno\n");
  expect_exit(qk({"translate", "--run", run, "--input", tmp / "in.txt", "--output", tmp / "out.txt"}), 1,
              {run + "/checkpoints/best was trained with a vocabulary of 28 but " + run + "/subwords.model has 30 pieces",
               "mixes files of two runs"});
  CHECK_FALSE(exists(tmp / "out.txt"));
}

// =============================== kills and full disks ===============================

// The child side of the next test: saves checkpoints of step k = start, start + 1, ... (every
// tensor filled with k) until it is killed. Hidden; runs only when the test starts it.
TEST_CASE("reliability helper: save checkpoints in a loop until killed", "[.reliability-helper]") {
  const char* dir = std::getenv("QKGRAD_SAVER_DIR");
  const char* start = std::getenv("QKGRAD_SAVER_START");
  if (dir == nullptr || start == nullptr) return;
  const pid_t parent = ::getppid();
  Seq2SeqTransformer model(saver_config());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int64_t k = std::atoll(start); std::chrono::steady_clock::now() < until && ::getppid() == parent; ++k) {
    fill_model(model, static_cast<float>(k));
    const TrainerState t = saver_state(model, k);
    save_checkpoint(dir, model, &t);
  }
}

TEST_CASE("reliability: SIGKILL during a save leaves the previous or the new checkpoint, never a mix", "[reliability]") {
  TempDir tmp;
  const std::string ckpt = tmp / "ckpt";
  std::mt19937_64 rng(8);
  std::uniform_int_distribution<int> delay_us(0, 40000);
  int64_t step = 0;
  int killed_mid_save = 0;
  for (int round = 0; round < 10; ++round) {
    // Everything the child needs is made before fork (only async-signal-safe calls after it).
    std::vector<std::string> env = {"QKGRAD_SAVER_DIR=" + ckpt, "QKGRAD_SAVER_START=" + std::to_string(step + 1)};
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    std::vector<char*> envp;
    for (std::string& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::string self = fs::read_symlink("/proc/self/exe").string(), name = "qkgrad-tests",
                test = "reliability helper: save checkpoints in a loop until killed";
    char* argv[] = {name.data(), test.data(), nullptr};
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const int null_fd = ::open("/dev/null", O_WRONLY);
      ::dup2(null_fd, STDOUT_FILENO);
      ::execve(self.c_str(), argv, envp.data());
      ::_exit(127);
    }
    // Kill it at a random moment once it has completed two saves.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (checkpoint_step(ckpt) < step + 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);
    const std::string leftover = ckpt + ".tmp-" + std::to_string(child);
    if (exists(leftover)) ++killed_mid_save;
    // Only this child's leftover may be there: earlier children's were removed by later saves.
    for (const auto& e : fs::directory_iterator(tmp.path)) {
      const std::string p = e.path().string();
      CHECK((p == ckpt || p == leftover));
    }
    const int64_t k = check_saver_checkpoint(ckpt);
    CHECK(k >= step + 2);
    step = k;
  }
  CHECK(killed_mid_save >= 1);  // the temporary exists for nearly the whole of each save
  // A save by a live process cleans up after the dead ones and leaves a complete checkpoint.
  Seq2SeqTransformer model(saver_config());
  fill_model(model, static_cast<float>(step + 1));
  const TrainerState t = saver_state(model, step + 1);
  save_checkpoint(ckpt, model, &t);
  CHECK(check_saver_checkpoint(ckpt) == step + 1);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp.path)) left.push_back(e.path().filename().string());
  CHECK(left == std::vector<std::string>{"ckpt"});
}

TEST_CASE("reliability: loading while another process saves never fails and never mixes saves", "[reliability]") {
  TempDir tmp;
  const std::string ckpt = tmp / "ckpt";
  std::vector<std::string> env = {"QKGRAD_SAVER_DIR=" + ckpt, "QKGRAD_SAVER_START=1"};
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = fs::read_symlink("/proc/self/exe").string(), name = "qkgrad-tests",
              test = "reliability helper: save checkpoints in a loop until killed";
  char* argv[] = {name.data(), test.data(), nullptr};
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDOUT_FILENO);
    ::execve(self.c_str(), argv, envp.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!checkpoint_exists(ckpt) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  Seq2SeqTransformer model(saver_config());
  std::set<float> model_values;
  std::set<int64_t> trainer_steps;
  std::string failure;
  for (int i = 0; i < 150 && failure.empty(); ++i) {
    try {
      load_model_weights(ckpt, model);
      const float v = model.named_parameters().front().second.data<float>()[0];
      for (const auto& [n, p] : model.named_parameters()) {
        if (!all_equal(p, v)) failure = cat("model.safetensors mixes saves: ", n, " is not all ", v);
      }
      model_values.insert(v);
      const TrainerState t = load_trainer_state(ckpt);
      const int64_t k = t.get_int("step");
      for (const auto& [n, tensor] : t.optimizer_state) {
        if (!all_equal(tensor, static_cast<float>(k))) failure = cat("trainer.safetensors of step ", k, ": ", n, " is not");
      }
      trainer_steps.insert(k);
    } catch (const Error& e) {
      failure = e.what();
    }
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  INFO(failure);
  CHECK(failure.empty());
  CHECK(model_values.size() >= 3);  // the loads did overlap with many saves
  CHECK(trainer_steps.size() >= 3);
}

TEST_CASE("reliability: leftovers of dead processes are removed by name, suffix and pid only", "[reliability]") {
  TempDir tmp;
  const std::string dead = std::to_string(dead_pid()), own = std::to_string(::getpid());
  for (const std::string& name : {"subwords.tmp-" + dead + ".model", "subwords.tmp-" + dead + ".vocab",
                                  "subwords.tmp-" + dead + ".other", "subwords.tmp-" + dead,
                                  "subwords.tmp-" + own + ".model", std::string("subwords.tmp-x.model"), "other.tmp-" + dead + ".model"}) {
    write(tmp / name, "x");
  }
  remove_leftovers_of_dead_processes(tmp.path, "subwords.tmp-", {".model", ".vocab"});
  CHECK_FALSE(exists(tmp / ("subwords.tmp-" + dead + ".model")));
  CHECK_FALSE(exists(tmp / ("subwords.tmp-" + dead + ".vocab")));
  for (const std::string& kept : {"subwords.tmp-" + dead + ".other", "subwords.tmp-" + dead, "subwords.tmp-" + own + ".model",
                                  std::string("subwords.tmp-x.model"), "other.tmp-" + dead + ".model"}) {
    INFO(kept);
    CHECK(exists(tmp / kept));
  }
}

TEST_CASE("reliability: temporaries of writers that died are removed by the next write", "[reliability]") {
  TempDir tmp;
  const std::string path = tmp / "out.txt";
  const std::string dead = path + ".tmp." + std::to_string(dead_pid());
  const std::string alive = path + ".tmp.1";  // init: a live process that is not this one
  write(dead, "half a translat");
  write(alive, "being written");
  write_file_atomically(path, [](std::FILE* f) { std::fputs("done\n", f); });
  CHECK(read(path) == "done\n");
  CHECK_FALSE(exists(dead));
  CHECK(exists(alive));
  // A checkpoint named with a trailing slash is saved next to itself, and replaced like any other.
  Seq2SeqTransformer model(saver_config());
  for (int k = 1; k <= 2; ++k) {
    fill_model(model, static_cast<float>(k));
    const TrainerState t = saver_state(model, k);
    save_checkpoint(tmp / "ckpt/", model, &t);
    CHECK(check_saver_checkpoint(tmp / "ckpt") == k);
  }
  CHECK(entries_containing(tmp.path, ".tmp-").empty());
  // The same through the program, for --output.
  const std::string dead2 = path + ".tmp." + std::to_string(dead_pid());
  write(dead2, "half");
  write(tmp / "in.txt", "uno\n");
  expect_exit(qk({"translate", "--run", trained().run, "--input", tmp / "in.txt", "--output", path}), 0, {});
  CHECK_FALSE(exists(dead2));
}

TEST_CASE("reliability: a full disk gives a clear error and keeps the previous checkpoint", "[reliability]") {
  TempDir tmp;
  Seq2SeqTransformer model(saver_config());
  // 1. A small tmpfs (root with CAP_SYS_ADMIN): ENOSPC.
  {
    SmallTmpfs disk(tmp / "tmpfs", 8u << 20);
    if (!disk.mounted) {
      WARN("disk full: no tmpfs (" << disk.failure << "); only the RLIMIT_FSIZE (file size limit) part runs");
    } else {
      std::cout << "test_reliability: disk full simulated with a tmpfs (ENOSPC) and with RLIMIT_FSIZE (EFBIG)\n";
      const std::string ckpt = disk.dir + "/ckpt";
      fill_model(model, 1);
      save_checkpoint(ckpt, model, nullptr);
      const uint64_t model_bytes = fs::file_size(ckpt + "/model.safetensors");
      disk.resize(disk.used() + model_bytes + model_bytes / 2);  // room for one more model, not for its optimizer state
      fill_model(model, 2);
      const TrainerState t = saver_state(model, 2);
      try {
        save_checkpoint(ckpt, model, &t);
        FAIL("the save did not fail");
      } catch (const Error& e) {
        CHECK_THAT(e.what(), Contains("save_checkpoint: cannot save " + ckpt + ": "));
        CHECK_THAT(e.what(), Contains("No space left on device"));
        CHECK_THAT(e.what(), Contains("free some disk space"));
      }
      Seq2SeqTransformer loaded(load_checkpoint_config(ckpt));
      load_model_weights(ckpt, loaded);
      for (const auto& [name, p] : loaded.named_parameters()) CHECK(all_equal(p, 1));
      CHECK(entries_containing(disk.dir, ".tmp").empty());
      disk.resize(64u << 20);  // with space again, the same save works
      save_checkpoint(ckpt, model, &t);
      CHECK(check_saver_checkpoint(ckpt) == 2);
      fs::remove_all(ckpt);

      // The trainer, resuming a run on a disk with no room for its next checkpoint.
      const std::string run = copy_of_trained_run(disk.dir + "/run");
      disk.resize(disk.used() + (64u << 10));
      std::vector<std::string> resume = train_args(trained().data, run, 30);
      resume.push_back("--resume");
      expect_exit(qk(resume), 1,
                  {"No space left on device", run + "/checkpoints/last holds step 20: free some disk space (or fix what the error names) and continue with --resume"});
      CHECK(checkpoint_step(run + "/checkpoints/last") == 20);
      CHECK(entries_containing(run, ".tmp").empty());
    }
  }
  // translate writing to stdout on a full disk (/dev/full): an error, not a silent success.
  write(tmp / "in.txt", "uno dos\n");
  Command full{{"translate", "--run", trained().run, "--input", tmp / "in.txt"}};
  full.stdout_path = "/dev/full";
  expect_exit(run_command(full), 1, {"writing the translations to stdout failed: No space left on device"});
  // 2. A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored): EFBIG.
  const std::string ckpt = tmp / "ckpt";
  fill_model(model, 1);
  save_checkpoint(ckpt, model, nullptr);
  const uint64_t model_bytes = fs::file_size(ckpt + "/model.safetensors");
  fill_model(model, 2);
  const TrainerState t = saver_state(model, 2);
  std::string message = "(the save did not fail)";
  {
    // The trainer file (2x the model) does not fit. Nothing else is written (nor printed: the
    // test log may be a file) while the limit holds.
    FileSizeLimit limit(model_bytes + model_bytes / 2);
    try {
      save_checkpoint(ckpt, model, &t);
    } catch (const Error& e) {
      message = e.what();
    }
  }
  CHECK_THAT(message, Contains("save_checkpoint: cannot save " + ckpt + ": "));
  CHECK_THAT(message, Contains("File too large"));
  CHECK_THAT(message, Contains("raise the quota or file size limit"));
  Seq2SeqTransformer loaded(load_checkpoint_config(ckpt));
  load_model_weights(ckpt, loaded);
  for (const auto& [name, p] : loaded.named_parameters()) CHECK(all_equal(p, 1));
  CHECK(entries_containing(tmp.path, ".tmp").empty());
  // The trainer under `ulimit -f`: it must not die by SIGXFSZ, and must say what happened.
  const std::string run = copy_of_trained_run(tmp / "run");
  std::vector<std::string> resume = train_args(trained().data, run, 30);
  resume.push_back("--resume");
  Command c{resume};
  c.file_size_limit = 50000;  // less than a model.safetensors of the tiny preset
  expect_exit(run_command(c), 1, {"File too large", run + "/checkpoints/last holds step 20"});
  CHECK(checkpoint_step(run + "/checkpoints/last") == 20);
  CHECK(entries_containing(run, ".tmp").empty());
}

TEST_CASE("reliability: --resume after SIGKILL mid-training is identical to an uninterrupted run", "[reliability]") {
  TempDir tmp;
  const std::string data = trained().data;
  auto args = [&](const std::string& run) {
    return std::vector<std::string>{"train", "--data", data, "--run", run, "--preset", "tiny", "--vocab-size", "30",
                                    "--max-steps", "300", "--eval-every", "100", "--eval-sentences", "2", "--save-every",
                                    "7", "--threads", "1"};
  };
  const std::string a = tmp / "a", b = tmp / "b";
  expect_exit(qk(args(a)), 0, {"stopped at step 300"});

  const pid_t child = spawn(args(b));
  REQUIRE(child > 0);
  std::mt19937_64 rng(8);
  const int64_t kill_after = std::uniform_int_distribution<int64_t>(20, 120)(rng);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (checkpoint_step(b + "/checkpoints/last") < kill_after && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::this_thread::sleep_for(std::chrono::microseconds(std::uniform_int_distribution<int>(0, 20000)(rng)));
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));  // killed mid-training, not finished
  const int64_t saved = checkpoint_step(b + "/checkpoints/last");
  INFO("killed after the checkpoint of step " << saved);
  REQUIRE(saved >= kill_after);
  REQUIRE(saved < 300);
  std::vector<std::string> resume = args(b);
  resume.push_back("--resume");
  expect_exit(qk(resume), 0, {"resumed from " + b + "/checkpoints/last at step " + std::to_string(saved), "stopped at step 300"});
  CHECK(entries_containing(b, ".tmp").empty());

  // The same parameters, optimizer state and loop state ...
  for (const char* which : {"last", "best"}) {
    for (const char* file : {"model.safetensors", "trainer.safetensors"}) {
      const std::string pa = a + "/checkpoints/" + which + "/" + file, pb = b + "/checkpoints/" + which + "/" + file;
      if (!exists(pa) && !exists(pb)) continue;
      const safetensors::Contents ca = safetensors::load(pa), cb = safetensors::load(pb);
      REQUIRE(ca.tensors.size() == cb.tensors.size());
      for (std::size_t i = 0; i < ca.tensors.size(); ++i) {
        INFO(pb << ": " << cb.tensors[i].first);
        REQUIRE(ca.tensors[i].first == cb.tensors[i].first);
        const Tensor& x = ca.tensors[i].second;
        const Tensor& y = cb.tensors[i].second;
        REQUIRE(x.nbytes() == y.nbytes());
        CHECK(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0);
      }
      safetensors::Metadata ma = ca.metadata, mb = cb.metadata;
      for (const char* timing : {"id", "train_seconds"}) {  // the id of the save, and a timing
        ma.erase(timing);
        mb.erase(timing);
      }
      CHECK(ma == mb);
    }
  }
  // ... and the same metrics, line by line (less the timings).
  auto metrics = [](const std::string& run) {
    std::vector<std::string> lines;
    const std::string text = read(run + "/metrics.jsonl");
    for (std::size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
      Json j = parse_json(text.substr(start, end - start), "metrics.jsonl");
      j.erase("elapsed_s");
      j.erase("tokens_per_s");
      lines.push_back(dump_json(j));
    }
    return lines;
  };
  const std::vector<std::string> ma = metrics(a), mb = metrics(b);
  CHECK(ma.size() == 9);  // 6 log lines and 3 evaluations
  REQUIRE(ma.size() == mb.size());
  for (std::size_t i = 0; i < ma.size(); ++i) CHECK(ma[i] == mb[i]);
}
