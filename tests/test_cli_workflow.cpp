// qkgrad-translate's workflow as Marian, fairseq and OpenNMT users expect it (issue 20), one
// test per item: resuming by run directory alone, config files and --dump-config; the
// tokeniser a run remembers and the signatures of scores; one output line per input line;
// n-best lists, score, --checkpoint, --keep-last and average, streaming translation; a
// progress display that fits the terminal.
#include <catch2/catch.hpp>

#include <poll.h>
#include <pty.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cpu/cpu_gemm_provider.h"
#include "core/backend.h"
#include "cli_helpers.h"
#include "io/checkpoint.h"
#include "io/json.h"

namespace fs = std::filesystem;
using namespace qkgrad::test_cli;
using Catch::Matchers::Contains;

namespace {

int64_t last_step(const std::string& run) { return qkgrad::load_trainer_state(run + "/checkpoints/last").get_int("step"); }

qkgrad::Json options_of(const std::string& run) {
  return qkgrad::parse_json(read(run + "/options.json"), run + "/options.json");
}

// `train` of the tiny preset on the corpus in `tmp` into run_dir, one thread, plus `flags`.
// The dev loss of the run's last evaluation (metrics.jsonl).
// The last value of `key` ("dev_loss", "train_loss") in a run's metrics.jsonl; -1 if none.
double last_metric(const std::string& run, const std::string& key) {
  std::ifstream in(run + "/metrics.jsonl");
  double value = -1;
  for (std::string line; std::getline(in, line);) {
    const qkgrad::Json j = qkgrad::Json::parse(line);
    if (j.contains(key)) value = j.at(key).get<double>();
  }
  return value;
}

Result train_tiny(const TempDir& tmp, const std::string& run_dir, const std::string& flags) {
  return run("train --data " + tmp.path + " --run " + run_dir + " --preset tiny --vocab-size 30 --threads 1 " + flags);
}

}  // namespace

TEST_CASE("workflow: train --run R --resume alone continues; flags with it change only what may change",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string run_dir = tmp / "run";
  Result r = train_tiny(tmp, run_dir, "--max-steps 6 --eval-every 100000");
  INFO(r.output);
  REQUIRE(r.status == 0);
  REQUIRE(last_step(run_dir) == 6);

  // Nothing retyped: options.json is the run's settings. A finished run says so.
  r = run("train --run " + run_dir + " --resume");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("is finished") && Contains("--max-steps 6"));

  // A budget given with --resume is printed, stored, and kept by the next plain resume.
  r = run("train --run " + run_dir + " --resume --max-steps 9 --lr 0.002 --threads 1");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("resume changes lr 0.001 -> 0.002, max_steps 6 -> 9"));
  CHECK(last_step(run_dir) == 9);
  CHECK(options_of(run_dir).at("max_steps") == 9);
  CHECK(options_of(run_dir).at("lr") == 0.002);
  r = run("train --run " + run_dir + " --resume");
  CHECK_THAT(r.output, Contains("is finished") && Contains("--max-steps 9"));

  // What defines the model or the data is refused, naming the key; nothing changes.
  const std::string before = read(run_dir + "/options.json");
  r = run("train --run " + run_dir + " --resume --layers 2");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("says layers = 1 but now it is 2"));
  r = run("train --run " + run_dir + " --resume --data " + tmp / "elsewhere");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("says data = "));
  CHECK(read(run_dir + "/options.json") == before);

  // A directory that is not a run.
  r = run("train --run " + tmp / "nothing" + " --resume");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("options.json does not exist") && Contains("drop --resume to start one"));
  CHECK_FALSE(fs::exists(tmp / "nothing"));
}

TEST_CASE("workflow: --config FILE (TOML or options.json) with the keys of options.json; --dump-config prints them",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  // The flags win over the file, the file over the preset it names.
  write(tmp / "c.toml", "# a small experiment\npreset = \"tiny\"\ndata = \"" + tmp.path +
                            "\"\nvocab_size = 30\nsubword_model = 'bpe'\nmax_steps = 4\neval_every = 100000\nlr = 0.003\n" +
                            "schedule = 'cosine'\nbatch_sort = 'longer'\n");
  Result r = run("train --config " + tmp / "c.toml" + " --dump-config --lr 0.004");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("preset = \"tiny\"") && Contains("d_model = 32") && Contains("lr = 0.004") &&
                           Contains("schedule = \"cosine\"") && Contains("max_steps = 4") &&
                           Contains("subword_model = \"bpe\""));
  write(tmp / "dumped.toml", r.output);

  // The dumped file trains the same run as the flags would.
  r = run("train --config " + tmp / "dumped.toml" + " --run " + tmp / "a" + " --threads 1");
  REQUIRE(r.status == 0);
  CHECK(last_step(tmp / "a") == 4);
  CHECK(options_of(tmp / "a").at("lr") == 0.004);
  CHECK(options_of(tmp / "a").at("subword_model") == "bpe");
  CHECK_THAT(r.output, Contains("training a joint SentencePiece bpe model (30 pieces)"));
  CHECK_THAT(r.output, Contains("tokens per epoch, sorted by the longer side (real tokens: "));
  // A run's own options.json is a config too: the same settings again.
  r = run("train --config " + tmp / "a/options.json" + " --run " + tmp / "b" + " --threads 1");
  REQUIRE(r.status == 0);
  CHECK(options_of(tmp / "b") == options_of(tmp / "a"));

  // Errors name the file, the line and the key; nothing is created.
  const auto refused = [&](const std::string& text, const std::string& message) {
    write(tmp / "bad.toml", text);
    const Result bad = run("train --config " + tmp / "bad.toml" + " --run " + tmp / "bad" + " --data " + tmp.path);
    INFO(bad.output);
    CHECK(bad.status == 1);
    CHECK_THAT(bad.output, Contains(tmp / "bad.toml" + message));
    CHECK_FALSE(fs::exists(tmp / "bad"));
  };
  refused("# ok\nlayers = 2\nwidth = 3\n", ":3: unknown setting 'width'");
  refused("lr = fast\n", ":1: 'lr' must be a finite number, got 'fast'");
  refused("layers = 2.5\n", ":1: 'layers' must be an integer, got '2.5'");
  refused("[model]\nlayers = 2\n", ":2: 'layers' is in the section [model]");
  refused("layers = 0\n", ": 'layers' must be between 1 and 64, got 0");
  refused("subword_model = \"wordpiece\"\n", ": 'subword_model' must be one of unigram, bpe, got \"wordpiece\"");
  refused("attention = \"qk\"\n", ": 'attention' must be one of qknorm, scaled_dot, rms_qknorm, layer_qknorm, got \"qk\"");
  r = run("train --config " + tmp / "missing.toml" + " --run " + tmp / "bad");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--config " + tmp / "missing.toml" + ": no such file"));
  // Without --data (nor data in the file), a new run is a usage error.
  r = run("train --run " + tmp / "bad");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--data is required for a new run"));
}

TEST_CASE("workflow: --dump-config prints what the run would use (inferred languages) and where each value came from",
          "[cli][workflow]") {
  TempDir tmp;
  const std::string data = tmp / "ende";
  fs::create_directories(data);
  write_corpus(data, 200);
  for (const char* split : {"train", "dev", "test"}) {  // an en -> de corpus: neither is a default language
    fs::rename(data + "/" + split + ".es", data + "/" + split + ".de");
  }
  // --src given, --tgt inferred from DATA: the dump holds the inferred target, and trains.
  Result r = run("train --preset tiny --data " + data + " --src en --vocab-size 30 --max-steps 2 --eval-every 100000 "
                 "--dump-config");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("tgt = \"de\"") && Contains("# inferred from " + data + "/train.*") &&
                           Contains("src = \"en\"") && Contains("# --src"));
  write(tmp / "c.toml", r.output);
  r = run("train --config " + tmp / "c.toml" + " --run " + tmp / "r" + " --threads 1");
  REQUIRE(r.status == 0);
  CHECK(options_of(tmp / "r").at("tgt") == "de");

  // A file that names one preset, a flag that names another: the dump says which value came
  // from where (the file's sizes over the flag's preset, the flags over the file).
  write(tmp / "exp.toml", "preset = \"tiny\"\nlayers = 1\nd_model = 32\n");
  r = run("train --config " + tmp / "exp.toml" + " --preset demo --lr 0.004 --dump-config");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("preset = \"demo\"") && Contains("# --preset"));
  CHECK_THAT(r.output, Contains("layers = 1") && Contains("# --config " + tmp / "exp.toml"));
  CHECK_THAT(r.output, Contains("ffn = 1024") && Contains("# preset demo"));
  CHECK_THAT(r.output, Contains("lr = 0.004") && Contains("# --lr"));
  // Without --data the languages are the defaults, and the dump says a run infers them.
  CHECK_THAT(r.output, Contains("tgt = \"en\"") && Contains("a run infers it from --data"));
}

TEST_CASE("workflow: --save-every is a setting of the run: stored, and kept by a resume without it; epochs from 1",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string run_dir = tmp / "run";
  Result r = train_tiny(tmp, run_dir, "--max-steps 4 --eval-every 100000 --save-every 3 --keep-last 10");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(options_of(run_dir).at("save_every") == 3);
  CHECK(fs::exists(run_dir + "/checkpoints/step-3"));
  // The resume without --save-every still saves every 3 steps (step-6), not only at its end.
  r = run("train --run " + run_dir + " --resume --max-steps 7 --threads 1");
  REQUIRE(r.status == 0);
  CHECK(fs::exists(run_dir + "/checkpoints/step-6"));
  CHECK(last_step(run_dir) == 7);
  // The resume message counts epochs from 1, as the log lines and metrics.jsonl do.
  const int64_t epoch = qkgrad::load_trainer_state(run_dir + "/checkpoints/last").get_int("epoch");
  r = run("train --run " + run_dir + " --resume --max-steps 8 --threads 1");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("at step 7 (epoch " + std::to_string(epoch + 1) + ", after "));
}

TEST_CASE("workflow: the run remembers its BLEU tokeniser; bleu and eval print sacreBLEU-style signatures",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  Result r = train_tiny(tmp, tmp / "run", "--max-steps 4 --eval-every 100000 --bleu-tokenize none");
  REQUIRE(r.status == 0);
  CHECK(options_of(tmp / "run").at("bleu_tokenize") == "none");
  // eval scores with the run's tokeniser unless told otherwise, and says which.
  r = run("eval --run " + tmp / "run" + " --beam 1");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("\nBLEU|nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:qkgrad-0.1.0 = ") &&
                           Contains("\nchrF2|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:qkgrad-0.1.0 = "));
  r = run("eval --run " + tmp / "run" + " --beam 1 --tokenize 13a");
  CHECK_THAT(r.output, Contains("|tok:13a|"));
  // The beam's stop rule (docs/checkpoint.md, Decoding): both run; anything else is refused by name.
  r = run("eval --run " + tmp / "run" + " --beam 3 --beam-stop bound --score-only --metrics bleu");
  CHECK(r.status == 0);
  r = run("translate --run " + tmp / "run" + " --beam-stop first-k < " + tmp / "test.es");
  CHECK(r.status == 0);
  r = run("eval --run " + tmp / "run" + " --beam-stop late");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--beam-stop"));
  // The length controls (--min-length, --word-penalty; a negative penalty is a reward): both
  // commands take them, and a bad value is refused by name.
  r = run("eval --run " + tmp / "run" + " --beam 2 --min-length 3 --word-penalty -0.5 --score-only --metrics bleu");
  CHECK(r.status == 0);
  r = run("translate --run " + tmp / "run" + " --word-penalty 0.25 --min-length 1 < " + tmp / "test.es");
  CHECK(r.status == 0);
  r = run("translate --run " + tmp / "run" + " --min-length -1 < " + tmp / "test.es");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--min-length"));
  r = run("eval --run " + tmp / "run" + " --word-penalty nan");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--word-penalty"));

  // 13a on text that looks tokenised (over 100 lines ending in " ."): sacreBLEU's warning.
  std::string tokenised, detokenised;
  for (int i = 0; i < 120; ++i) {
    tokenised += "the cat sat on the mat number " + std::to_string(i) + " .\n";
    detokenised += "the cat sat on the mat number " + std::to_string(i) + ".\n";
  }
  write(tmp / "tok.txt", tokenised);
  write(tmp / "detok.txt", detokenised);
  r = run("bleu --ref " + tmp / "tok.txt" + " --hyp " + tmp / "tok.txt");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("warning: 120 lines end in a tokenised period") && Contains("|tok:13a|"));
  r = run("bleu --ref " + tmp / "tok.txt" + " --hyp " + tmp / "tok.txt" + " --tokenize none");
  CHECK_THAT(r.output, !Contains("warning") && Contains("|tok:none|"));
  r = run("bleu --ref " + tmp / "detok.txt" + " --hyp " + tmp / "detok.txt");
  CHECK_THAT(r.output, !Contains("warning"));
}

TEST_CASE("workflow: eval and translate answer every input line; over-long lines are cropped and counted",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  Result r = train_tiny(tmp, tmp / "run", "--max-steps 4 --eval-every 100000");
  REQUIRE(r.status == 0);
  // A test set with an empty source line and an over-long one: 10 lines in, 10 out, all scored.
  std::string src, ref, long_line;
  for (int i = 0; i < 300; ++i) long_line += "uno dos ";
  for (int i = 0; i < 10; ++i) {
    src += i == 3 ? "\n" : i == 6 ? long_line + "\n" : "uno dos\n";
    ref += "one two\n";
  }
  fs::create_directories(tmp / "t");
  write(tmp / "t/test.es", src);
  write(tmp / "t/test.en", ref);
  r = run("eval --run " + tmp / "run" + " --data " + tmp / "t" + " --beam 1 --max-length 40");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("/run/checkpoints/best (10 sentences, beam 1)") &&
                           Contains("cropped 1 line longer than --max-length 40 subwords") &&
                           Contains(tmp / "t/test.es" + ":7)") && Contains("ref_len = 20)"));
  const std::string hyp = read(tmp / "run/test.hyp");
  CHECK(std::count(hyp.begin(), hyp.end(), '\n') == 10);
  // The hypothesis file scores the same with bleu.
  const Result again = run("bleu --ref " + tmp / "t/test.en" + " --hyp " + tmp / "run/test.hyp");
  CHECK_THAT(r.output, Contains(again.output.substr(0, again.output.find('\n'))));

  // translate: empty in, empty out; one line per input line.
  write(tmp / "in.txt", "uno\n\n   \ndos tres\n");
  r = run("translate --run " + tmp / "run" + " --input " + tmp / "in.txt" + " --output " + tmp / "out.txt" + " --beam 1");
  REQUIRE(r.status == 0);
  const std::string out = read(tmp / "out.txt");
  CHECK(std::count(out.begin(), out.end(), '\n') == 4);
  CHECK(out.find("\n\n\n") != std::string::npos);  // lines 2 and 3 are empty

  // Mismatched counts are refused before any translating.
  write(tmp / "t/test.en", ref + "one more\n");
  r = run("eval --run " + tmp / "run" + " --data " + tmp / "t");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("has 10 lines but") && Contains("has 11; they must be aligned line by line"));
  // An empty reference line is scored, as sacreBLEU 2.6 (and `bleu`) score it: eval and bleu agree.
  write(tmp / "t/test.en", "one\n\none\none\none\none\none\none\none\none\n");
  r = run_shell(kProgram + " eval --run " + tmp / "run" + " --data " + tmp / "t" + " --score-only 2>/dev/null");
  CHECK(r.status == 0);
  const Result bleu = run("bleu --score-only --ref " + tmp / "t/test.en" + " --hyp " + tmp / "run/test.hyp");
  CHECK(bleu.status == 0);
  CHECK(r.output == bleu.output);  // only the numbers on stdout
}

namespace {

// Starts `qkgrad-translate ARGS` with pipes for stdin and stdout; returns the pid.
pid_t start_with_pipes(const std::vector<std::string>& args, int& to_child, int& from_child) {
  int in[2], out[2];
  REQUIRE(::pipe(in) == 0);
  REQUIRE(::pipe(out) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::close(in[1]);
    ::close(out[0]);
    std::vector<char*> argv{const_cast<char*>(kProgram.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kProgram.c_str(), argv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  to_child = in[1];
  from_child = out[0];
  return pid;
}

// One line from `fd`, waiting at most `seconds`; "" with timed_out set if none came.
std::string read_line(int fd, int seconds, bool& timed_out) {
  std::string line;
  timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (line.empty() || line.back() != '\n') {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      timed_out = true;
      return line;
    }
    char c;
    if (::read(fd, &c, 1) != 1) break;
    line += c;
  }
  return line;
}

}  // namespace

TEST_CASE("workflow: n-best lists, score, --checkpoint, --keep-last with average, and streaming translation",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string run_dir = tmp / "run";
  Result r = train_tiny(tmp, run_dir, "--max-steps 30 --eval-every 10 --keep-last 2");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // --keep-last 2: the two newest saves, model-only, beside best and last.
  CHECK_FALSE(fs::exists(run_dir + "/checkpoints/step-10"));
  CHECK(qkgrad::checkpoint_exists(run_dir + "/checkpoints/step-20"));
  CHECK(qkgrad::checkpoint_exists(run_dir + "/checkpoints/step-30"));

  // n-best: K lines per input line, `N ||| text ||| score`, best first; an empty line gets one.
  write(tmp / "in.txt", "uno dos\n\ntres\n");
  r = run("translate --run " + run_dir + " --input " + tmp / "in.txt" + " --n-best 3 --beam 3");
  REQUIRE(r.status == 0);
  std::istringstream lines(r.output);
  std::map<long, std::vector<double>> scores;
  for (std::string line; std::getline(lines, line);) {
    // Moses/Marian: N ||| translation ||| F0= log P ||| score (= log P / length penalty <= 0).
    const auto first = line.find(" ||| "), last = line.rfind(" ||| "), f0 = line.find(" ||| F0= ");
    REQUIRE(first != std::string::npos);
    REQUIRE(f0 != std::string::npos);
    REQUIRE(last > f0);
    const double log_p = std::stod(line.substr(f0 + 9)), score = std::stod(line.substr(last + 5));
    CHECK(log_p <= 0);
    CHECK(((log_p == 0 && score == 0) || score > log_p));  // the penalty (> 1 for any length) shrinks |log P|
    scores[std::stol(line.substr(0, first))].push_back(score);
  }
  CHECK(scores.size() == 3);
  CHECK(scores[0].size() == 3);
  CHECK(scores[1] == std::vector<double>{0.0});
  for (const auto& [id, s] : scores) CHECK(std::is_sorted(s.rbegin(), s.rend()));
  // --threads changes the speed, not the translations.
  const Result one = run("translate --run " + run_dir + " --input " + tmp / "in.txt" + " --threads 1");
  const Result all = run("translate --run " + run_dir + " --input " + tmp / "in.txt");
  REQUIRE(one.status == 0);
  CHECK(one.output == all.output);
  r = run("translate --run " + run_dir + " --input " + tmp / "in.txt" + " --n-best 5");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--n-best 5 needs --beam 5 or more"));

  // score: one log-probability per pair; --normalize divides by the tokens.
  write(tmp / "s.es", "uno dos\ntres\n");
  write(tmp / "s.en", "one two\nthree\n");
  r = run("score --run " + run_dir + " --src " + tmp / "s.es" + " --tgt " + tmp / "s.en");
  REQUIRE(r.status == 0);
  std::istringstream numbers(r.output);
  double a = 0, b = 0;
  numbers >> a >> b;
  CHECK(a < 0);
  CHECK(b < 0);
  write(tmp / "s.en", "one two\n");
  r = run("score --run " + run_dir + " --src " + tmp / "s.es" + " --tgt " + tmp / "s.en");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("has 2 lines but") && Contains("has 1"));
  // A line longer than --max-length is refused by name: a cropped line would get another score.
  write(tmp / "s.en", "one two three four five six\nthree\n");
  r = run("score --run " + run_dir + " --src " + tmp / "s.es" + " --tgt " + tmp / "s.en" + " --max-length 2");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains(tmp / "s.en" + ":1: the line is ") && Contains("more than --max-length 2"));
  r = run("average --out " + tmp / "x");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("give --checkpoints A,B,... or --run R --last K"));

  // --checkpoint: last, a directory, or an error naming the choices.
  r = run("translate --run " + run_dir + " --input " + tmp / "in.txt" + " --checkpoint last");
  CHECK(r.status == 0);
  r = run("translate --run " + run_dir + " --input " + tmp / "in.txt" + " --checkpoint " + tmp / "nope");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("is not a checkpoint (choose best, last, or a checkpoint directory"));

  // average: the mean of the kept checkpoints, usable with --checkpoint.
  r = run("average --run " + run_dir + " --last 2 --out " + tmp / "avg");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("averaged 2 checkpoints"));
  r = run("eval --run " + run_dir + " --checkpoint " + tmp / "avg" + " --beam 1");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains(tmp / "avg (200 sentences"));
  r = run("average --run " + run_dir + " --last 3 --out " + tmp / "avg3");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("2 step-N checkpoints, fewer than --last 3"));

  // Streaming: on a pipe, a line's translation comes back before the input ends.
  int to_child = -1, from_child = -1;
  const pid_t pid = start_with_pipes({"translate", "--run", run_dir, "--batch-lines", "1", "--beam", "1"}, to_child, from_child);
  REQUIRE(::write(to_child, "uno dos\n", 8) == 8);
  bool timed_out = false;
  const std::string answer = read_line(from_child, 30, timed_out);
  CHECK_FALSE(timed_out);
  CHECK(answer.back() == '\n');
  ::close(to_child);  // the end of the input: the program finishes
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(from_child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  // ... also with the default batch of 500 lines on a pipe: what has arrived is translated when
  // the input pauses, and the next line after that.
  const pid_t pid2 = start_with_pipes({"translate", "--run", run_dir, "--beam", "1"}, to_child, from_child);
  REQUIRE(::write(to_child, "uno dos\n", 8) == 8);
  CHECK(read_line(from_child, 30, timed_out).back() == '\n');
  CHECK_FALSE(timed_out);
  REQUIRE(::write(to_child, "tres\n", 5) == 5);
  CHECK(read_line(from_child, 30, timed_out).back() == '\n');
  CHECK_FALSE(timed_out);
  ::close(to_child);
  ::waitpid(pid2, &status, 0);
  ::close(from_child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

namespace {

// Runs `command` on a pseudo-terminal of `columns` columns (a terminal that rewraps lines, as
// VTE's), passing what it writes to `seen` as it comes; `seen` may act on the terminal (resize
// it, type into it). Returns the whole output and the exit status.
std::string run_on_terminal(const std::string& command, unsigned short columns, int& status,
                            const std::function<void(int master, const std::string& screen)>& seen) {
  int master = -1;
  winsize ws{};
  ws.ws_col = columns;
  ws.ws_row = 24;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &ws);
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const std::string line = "unset XTERM_VERSION STY; TERM=xterm-256color exec " + command;
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string screen;
  char buf[4096];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) {
    screen.append(buf, static_cast<std::size_t>(n));
    seen(master, screen);
  }
  ::waitpid(pid, &status, 0);
  ::close(master);
  return screen;
}

// The live lines drawn in `screen` (the segments between \r or \n that start with `prefix`,
// ESC [ K removed): their count and the longest.
std::pair<std::size_t, std::size_t> live_lines(const std::string& screen, const std::string& prefix) {
  std::size_t redraws = 0, longest = 0;
  for (std::size_t start = 0; start < screen.size();) {
    const std::size_t end = std::min(screen.find_first_of("\r\n", start), screen.size());
    std::string segment = screen.substr(start, end - start);
    for (std::size_t e; (e = segment.find("\x1b[K")) != std::string::npos;) segment.erase(e, 3);
    for (std::size_t e; (e = segment.find("\x1b[J")) != std::string::npos;) segment.erase(e, 3);
    for (std::size_t e; (e = segment.find("\x1b[1A")) != std::string::npos;) segment.erase(e, 4);
    if (segment.rfind(prefix, 0) == 0 && segment.find(" [") != std::string::npos) {
      ++redraws;
      longest = std::max(longest, segment.size());
    }
    start = end + 1;
  }
  return {redraws, longest};
}

}  // namespace

TEST_CASE("workflow: the progress bar fits the terminal, follows a shrink, moves during evaluation, and Ctrl-C "
          "clears it; off a terminal, timestamped lines every --log-every", "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string args = " --preset tiny --vocab-size 30 --max-steps 40 --eval-every 20 --log-every 10 --threads 1";
  // On a pseudo-terminal of 80 columns: every redraw fits in 77 (3 left for the echo of ^C), with
  // step/total, % and a bar; the dev evaluation shows its own progress.
  int status = 0;
  std::string screen = run_on_terminal(kProgram + " train --data " + tmp.path + " --run " + tmp / "tty" + args, 80,
                                       status, [](int, const std::string&) {});
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto [redraws, longest] = live_lines(screen, "step ");
  INFO(screen);
  CHECK(redraws >= 30);
  CHECK(longest <= 77);
  CHECK_THAT(screen, Contains("step 35/40  88% [") && Contains("tok/s | ETA "));
  CHECK_THAT(screen, Contains("eval at step 20 [") && Contains("] dev BLEU: translated ") && Contains("] dev loss: batch 1/"));

  // The terminal shrinks to 40 columns mid-run: the next redraw goes up over the row the old
  // line was rewrapped onto and clears it (ESC [ 1 A, ESC [ J), and the lines fit in 37.
  std::size_t resized_at = std::string::npos;
  screen = run_on_terminal(kProgram + " train --data " + tmp.path + " --run " + tmp / "shrink" + args, 80, status,
                           [&](int master, const std::string& seen) {
                             if (resized_at != std::string::npos || seen.find("step 5/40") == std::string::npos) return;
                             winsize small{};
                             small.ws_col = 40;
                             small.ws_row = 24;
                             ::ioctl(master, TIOCSWINSZ, &small);
                             resized_at = seen.size();
                           });
  REQUIRE(resized_at != std::string::npos);
  const std::string after = screen.substr(resized_at);
  INFO(after);
  CHECK_THAT(after, Contains("\r\x1b[1A\x1b[J"));
  CHECK(live_lines(after, "step ").second <= 37);

  // Ctrl-C typed on the terminal: a note at once, on a cleared row (not after the bar and its ^C),
  // then the save and the exit status of SIGINT.
  bool typed = false;
  screen = run_on_terminal(kProgram + " train --data " + tmp.path + " --run " + tmp / "ctrl-c" + args +
                               " --max-steps 100000 --eval-every 100000",
                           80, status, [&](int master, const std::string& seen) {
                             if (typed || seen.find("step 3/") == std::string::npos) return;
                             REQUIRE(::write(master, "\x03", 1) == 1);
                             typed = true;
                           });
  INFO(screen);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  CHECK_THAT(screen, Contains("\r\x1b[Kqkgrad-translate train: stopping: the step (or dev evaluation) in progress finishes"));
  CHECK_THAT(screen, Contains("interrupted by SIGINT (Ctrl-C) at step "));

  // Off a terminal: no bar, one timestamped line every 10 steps.
  const Result r = run("train --data " + tmp.path + " --run " + tmp / "pipe" + args);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, !Contains(" [#"));
  std::istringstream lines(r.output);
  int logged = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" step ") == std::string::npos || line.find("| epoch") == std::string::npos) continue;
    ++logged;
    CHECK(line.size() > 20);
    CHECK(line[4] == '-');   // 2026-12-01 15:16:04 step 10/40 ...
    CHECK(line[13] == ':');
    CHECK(line.substr(19, 6) == " step ");
  }
  CHECK(logged == 4);
}

TEST_CASE("workflow: help and defaults: the presets listed, test flags hidden, --version, languages inferred or asked for",
          "[cli][workflow]") {
  Result r = run("train --help");
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("presets (--preset") && Contains("tiny        demo       small       paper") &&
                           Contains("max_steps                 1000        3000      100000      100000") &&
                           Contains("no time limit") && !Contains("inject-nan"));
  r = run("--version");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("qkgrad-translate 0.1.0"));

  TempDir tmp;
  fs::create_directories(tmp / "m30");
  for (const char* split : {"train", "dev", "test"}) {
    write(tmp / "m30/" + std::string(split) + ".de", "eins zwei\ndrei\n");
    write(tmp / "m30/" + std::string(split) + ".en", "one two\nthree\n");
  }
  // Neither language given, and DATA is not es/en: both are asked for, naming what DATA has.
  r = run("train --data " + tmp / "m30" + " --run " + tmp / "r" + " --preset tiny");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("has train.de, train.en; say which is the source") && Contains("--src de --tgt en"));
  CHECK_FALSE(fs::exists(tmp / "r"));
  // One given: the other is inferred (here the subwords then fail on the tiny corpus, after
  // naming both files).
  r = run("train --data " + tmp / "m30" + " --run " + tmp / "r" + " --preset tiny --tgt en --vocab-size 1000");
  CHECK_THAT(r.output, Contains(tmp / "m30/train.de and " + tmp / "m30/train.en"));
}

TEST_CASE("workflow: --best-metric picks checkpoints/best by chrF or loss; the evaluation subset is stated; eval --split",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  Result r = train_tiny(tmp, tmp / "run", "--max-steps 40 --eval-every 20 --best-metric loss");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("BLEU and chrF (beam 4) on the first 100 (--eval-sentences; 0: all); checkpoints/best by dev loss") &&
                           Contains("(best loss so far: saved)") && Contains("best dev loss "));
  CHECK(options_of(tmp / "run").at("best_metric") == "loss");
  // What picks "best" is part of the run: changing it on resume is refused.
  r = run("train --run " + tmp / "run" + " --resume --max-steps 60 --best-metric bleu");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("says best_metric = \"loss\""));
  r = train_tiny(tmp, tmp / "all", "--max-steps 20 --eval-every 20 --eval-sentences 0 --best-metric chrf");
  CHECK_THAT(r.output, Contains("on all of them; checkpoints/best by dev chrF"));
  // eval --split names the splits there are.
  r = run("eval --run " + tmp / "run" + " --split valid");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--split valid: " + tmp / "valid.es" + " does not exist (nor gzipped, .gz); " + tmp.path +
                                " has the splits dev, test, train"));
  // ... gzipped ones too.
  fs::create_directories(tmp / "gz");
  for (const char* split : {"train", "dev", "test"}) {
    for (const char* lang : {"es", "en"}) {
      const std::string name = std::string(split) + "." + lang;
      fs::copy_file(tmp / name, tmp / ("gz/" + name));
    }
  }
  REQUIRE(run_shell("gzip " + tmp / "gz/train.es " + tmp / "gz/dev.es " + tmp / "gz/dev.en " + tmp / "gz/test.en").status == 0);
  r = run("eval --run " + tmp / "run" + " --data " + tmp / "gz" + " --split valid");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains(" has the splits dev, test, train"));
  // attention --out makes its folder.
  r = run("attention --run " + tmp / "run" + " --text \"uno dos\" --out " + tmp / "new/folder/att");
  CHECK(r.status == 0);
  CHECK(fs::exists(tmp / "new/folder/att-cross.svg"));
}

TEST_CASE("workflow: curves put train and dev loss on one panel, mark the best checkpoint, and skip QKNorm's panel "
          "without QKNorm", "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  for (const char* attn : {"qknorm", "scaled_dot"}) {
    const std::string run_dir = tmp / attn;
    const Result r = train_tiny(tmp, run_dir, std::string("--attn ") + attn + " --max-steps 100 --eval-every 50");
    REQUIRE(r.status == 0);
    const std::string svg = read(run_dir + "/curves.svg");
    INFO(attn);
    CHECK_THAT(svg, Contains("loss per target token") && Contains("train (label-smoothed)") &&
                        Contains("dev BLEU and chrF") && Contains("learning rate") &&
                        Contains("checkpoints/best (step ") && !Contains("no data"));
    if (std::string(attn) == "qknorm") {
      CHECK_THAT(svg, Contains("QKNorm gain g") && Contains(">encoder 0 self<") && Contains(">decoder 0 cross<"));
    } else {
      CHECK_THAT(svg, !Contains("QKNorm gain g"));
    }
  }
}

TEST_CASE("workflow: train --attn rms_qknorm and layer_qknorm train, resume, translate and evaluate", "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  for (const char* attn : {"rms_qknorm", "layer_qknorm"}) {
    INFO(attn);
    const std::string run_dir = tmp / attn;
    Result r = train_tiny(tmp, run_dir, std::string("--attn ") + attn + " --max-steps 6 --eval-every 100000");
    INFO(r.output);
    REQUIRE(r.status == 0);
    CHECK_THAT(r.output, Contains(std::string(attn) + " attention"));
    CHECK(options_of(run_dir).at("attention") == attn);
    r = run("train --run " + run_dir + " --resume --max-steps 9 --threads 1");
    CHECK(r.status == 0);
    CHECK(last_step(run_dir) == 9);
    r = run("train --run " + run_dir + " --resume --attn qknorm");  // what defines the model stays
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Contains("attention"));
    r = run("translate --run " + run_dir + " --input " + tmp / "test.es" + " --beam 1");
    CHECK(r.status == 0);
    r = run("eval --run " + run_dir + " --beam 1");
    CHECK(r.status == 0);
    CHECK_THAT(r.output, Contains("\nBLEU|nrefs:1|"));
  }
}

TEST_CASE("workflow: bring your own corpus, gzipped or not", "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  for (const char* name : {"train.es", "train.en", "dev.es", "dev.en", "test.es"}) {
    REQUIRE(std::system(("gzip " + tmp / name).c_str()) == 0);  // test.en stays plain
  }
  Result r = train_tiny(tmp, tmp / "run", "--max-steps 6 --eval-every 100000");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("train 200 pairs") && Contains(tmp / "train.es.gz"));
  r = run("eval --run " + tmp / "run" + " --beam 1");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("(200 sentences, beam 1)"));
  // translate --input takes .gz too; a damaged one names the file.
  REQUIRE(std::system(("printf 'uno dos\\ntres\\n' | gzip > " + tmp / "in.gz").c_str()) == 0);
  r = run("translate --run " + tmp / "run" + " --input " + tmp / "in.gz" + " --beam 1");
  CHECK(r.status == 0);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 2);
  write(tmp / "bad.gz", std::string("\x1f\x8b\x08\x00", 4) + "cut short");
  r = run("bleu --ref " + tmp / "bad.gz" + " --hyp " + tmp / "test.en");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains(tmp / "bad.gz: not a valid gzip file"));
}

TEST_CASE("workflow: float64, a gain per head and FixNorm off are flags, stored in the checkpoint", "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  Result r = train_tiny(tmp, tmp / "run", "--max-steps 4 --eval-every 100000 --dtype f64 --qknorm-gain per_head --fixnorm off");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const qkgrad::Json config = qkgrad::parse_json(read(tmp / "run/checkpoints/last/config.json"), "config.json");
  CHECK(config.at("model").at("dtype") == "f64");
  CHECK(config.at("model").at("per_head_g") == true);
  CHECK(config.at("model").at("fixnorm") == false);
  r = run("train --run " + tmp / "run" + " --resume --max-steps 6 --dtype f32");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("says dtype = \"f64\" but now it is \"f32\""));
  r = run("train --run " + tmp / "run" + " --resume --max-steps 6 --threads 1");
  CHECK(r.status == 0);
  write(tmp / "in.txt", "uno dos\n");
  r = run("translate --run " + tmp / "run" + " --input " + tmp / "in.txt");
  CHECK(r.status == 0);
}

TEST_CASE("workflow: --accumulate K splits each batch into K micro-batches with the same update (dropout 0)",
          "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  auto losses = [&](const std::string& run_dir) {
    std::vector<double> out;  // every train_loss and dev_loss, in order
    std::istringstream lines(read(run_dir + "/metrics.jsonl"));
    for (std::string line; std::getline(lines, line);) {
      const qkgrad::Json j = qkgrad::parse_json(line, "metrics.jsonl");
      for (const char* key : {"train_loss", "dev_loss"}) {
        if (j.contains(key)) out.push_back(j.at(key).get<double>());
      }
    }
    return out;
  };
  const std::string base = "--max-steps 30 --eval-every 30 --log-every 10 --dropout 0";
  REQUIRE(train_tiny(tmp, tmp / "one", base).status == 0);
  REQUIRE(train_tiny(tmp, tmp / "three", base + " --accumulate 3").status == 0);
  const std::vector<double> a = losses(tmp / "one"), b = losses(tmp / "three");
  REQUIRE(a.size() == 4);  // train_loss at 10, 20, 30; dev_loss at 30
  REQUIRE(b.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-5));  // measured: ~1e-8
  CHECK(options_of(tmp / "three").at("accumulate") == 3);
  // More micro-batches than a batch has pairs: the empty shares are skipped.
  REQUIRE(train_tiny(tmp, tmp / "many", base + " --accumulate 1000 --max-steps 3").status == 0);
}

TEST_CASE("workflow: translate and eval decode with an ensemble (--checkpoint A,B); translate --sample draws "
          "reproducibly from --seed; --quiet", "[cli][workflow]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  Result r = train_tiny(tmp, tmp / "run", "--max-steps 30 --eval-every 10 --keep-last 2");
  INFO(r.output);
  REQUIRE(r.status == 0);
  write(tmp / "in.txt", "uno dos\ntres cuatro\ncinco uno\n");
  const std::string translate = "translate --run " + tmp / "run" + " --input " + tmp / "in.txt";
  // An ensemble of a checkpoint with itself is that checkpoint; two checkpoints decode together.
  Result alone = run(translate + " --checkpoint last --n-best 2");
  Result twice = run(translate + " --checkpoint last,last --n-best 2");
  REQUIRE(alone.status == 0);
  CHECK(twice.status == 0);
  CHECK(twice.output == alone.output);
  r = run(translate + " --checkpoint " + tmp / "run/checkpoints/step-20" + ",last");
  CHECK(r.status == 0);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 3);
  // eval names the ensemble; with --quiet and --score-only, stdout and stderr hold the number alone.
  r = run("eval --run " + tmp / "run" + " --checkpoint best,last --beam 1");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("checkpoints/best," + tmp / "run/checkpoints/last (200 sentences, beam 1)"));
  r = run("eval --run " + tmp / "run" + " --checkpoint best,last --beam 1 --metrics bleu --score-only --quiet");
  CHECK(r.status == 0);
  CHECK(r.output.find_first_not_of("0123456789.\n") == std::string::npos);
  r = run(translate + " --checkpoint last,nowhere");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("--checkpoint nowhere: "));
  r = run("score --run " + tmp / "run" + " --src " + tmp / "in.txt" + " --tgt " + tmp / "in.txt" + " --checkpoint best,last");
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("an ensemble (a list A,B) is for decoding, with translate and eval"));
  r = run(translate + " --checkpoint best --checkpoint last");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("an ensemble is one list: --checkpoint A,B"));

  // Sampling: the same seed gives the same samples, whatever the batching (which moves log P in
  // its last digits only); --n-best K gives K.
  const std::string sample = translate + " --sample --temperature 2 --n-best 3";
  Result a = run(sample + " --seed 7");
  Result b = run(sample + " --seed 7 --batch-lines 1");
  Result c = run(sample + " --seed 8");
  REQUIRE(a.status == 0);
  auto texts = [](const std::string& nbest) {  // "N ||| text" of every line
    std::string out;
    std::istringstream lines(nbest);
    for (std::string line; std::getline(lines, line);) out += line.substr(0, line.find(" ||| F0= ")) + "\n";
    return out;
  };
  CHECK(texts(a.output) == texts(b.output));
  CHECK(texts(a.output) != texts(c.output));
  CHECK(std::count(a.output.begin(), a.output.end(), '\n') == 9);
  CHECK_THAT(a.output, Contains("0 ||| ") && Contains("2 ||| ") && Contains(" ||| F0= "));
  r = run(translate + " --sample --top-k 1");  // top-k 1 is greedy decoding
  CHECK(r.output == run(translate + " --greedy").output);
  r = run(translate + " --temperature 0.5");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--temperature needs --sample"));
  r = run(translate + " --sample --beam 4");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("leave out --beam and --greedy"));
  r = run(translate + " --sample --temperature 0");
  CHECK(r.status == 2);
  r = run(translate + " --sample --min-length 3");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--min-length shapes the beam search"));

  // --quiet: nothing on stderr but errors.
  write(tmp / "long.txt", "uno dos tres cuatro cinco uno dos tres cuatro cinco\n");
  r = run("translate --run " + tmp / "run" + " --input " + tmp / "long.txt" + " --max-length 3");
  CHECK_THAT(r.output, Contains("note: cropped 1 line"));
  r = run_shell(kProgram + " translate --run " + tmp / "run" + " --input " + tmp / "long.txt" +
                " --max-length 3 --quiet 2>&1 >/dev/null");
  CHECK(r.status == 0);
  CHECK(r.output.empty());
}

TEST_CASE("workflow: train --precision bf16 (mixed precision) trains, is stored, may change on resume; refused where "
          "it cannot run", "[cli][workflow][bf16]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string missing = qkgrad::backend(qkgrad::Device::cpu).bf16_products_missing();
  CHECK(missing == qkgrad::cpu::bf16_gemm_missing());  // the CPU backend's answer is oneDNN's
  Result r = train_tiny(tmp, tmp / "run", "--max-steps 20 --eval-every 100 --log-every 10 --lr 0.01 --warmup 1 --precision bf16");
  INFO(r.output);
  if (!missing.empty()) {  // a CPU without native bf16: said at once, nothing made
    CHECK(r.status == 2);
    CHECK_THAT(r.output, Contains("--precision bf16: " + missing));
    CHECK_FALSE(fs::exists(tmp / "run"));
    return;
  }
  REQUIRE(r.status == 0);
  CHECK_THAT(r.output, Contains("(mixed precision: bf16 products in the linear layers)"));
  CHECK(options_of(tmp / "run").at("precision") == "bf16");
  // The training loss of steps 11-20 differs by the products' rounding only: close, not equal.
  // (A high learning rate from step 1, so that the rounding moves the weights measurably; the dev
  // loss is evaluated in f32, and after a few warm-up steps the two could round to one float.)
  r = train_tiny(tmp, tmp / "f32", "--max-steps 20 --eval-every 100 --log-every 10 --lr 0.01 --warmup 1");
  REQUIRE(r.status == 0);
  const double loss16 = last_metric(tmp / "run", "train_loss"), loss32 = last_metric(tmp / "f32", "train_loss");
  CHECK(loss32 > 0);
  CHECK(loss16 != loss32);
  CHECK(std::fabs(loss16 - loss32) < 0.01 * loss32);
  // A resume may change it; the change is printed and stored.
  r = run("train --run " + tmp / "run" + " --resume --max-steps 21 --precision f32");
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Contains("precision"));
  CHECK(options_of(tmp / "run").at("precision") == "f32");
  r = train_tiny(tmp, tmp / "f64", "--max-steps 2 --dtype f64 --precision bf16");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("--precision bf16 mixes bf16 products into float32 training; --dtype is f64"));
}
