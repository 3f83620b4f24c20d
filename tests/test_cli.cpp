// qkgrad-translate as users run it: --help on every subcommand, exit statuses and messages for
// bad input, and Ctrl-C during training saving a checkpoint that --resume continues.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "cli_helpers.h"
#include "core/backend.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/json.h"

namespace fs = std::filesystem;
using namespace qkgrad::test_cli;

TEST_CASE("every subcommand answers --help", "[cli]") {
  for (const char* command : {"prepare-bible", "train", "translate", "eval", "bleu", "grads", "attention",
                              "attention-stats"}) {
    const Result r = run(std::string(command) + " --help");
    INFO(command << ": " << r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("usage: qkgrad-translate") != std::string::npos);
  }
  CHECK(run("--help").status == 0);
  CHECK(run("").status == 2);
  CHECK(run("frobnicate").status == 2);
}

TEST_CASE("every subcommand answers -h and --version, as the program does", "[cli]") {
  for (const char* command : {"prepare-bible", "train", "translate", "eval", "score", "bleu", "average", "grads",
                              "attention", "attention-stats"}) {
    INFO(command);
    Result r = run(std::string(command) + " -h");
    CHECK(r.status == 0);
    CHECK(r.output.find("usage: qkgrad-translate " + std::string(command)) != std::string::npos);
    r = run(std::string(command) + " --version");
    CHECK(r.status == 0);
    CHECK(r.output == "qkgrad-translate " + std::string(command) + " " QKGRAD_VERSION " (qkgrad " QKGRAD_VERSION ")\n");
  }
  CHECK(run("-h").status == 0);
  CHECK(run("--version").status == 0);
}

TEST_CASE("a flag whose repetition could mean several values is refused when repeated, or means them; others take "
          "the last", "[cli]") {
  TempDir tmp;
  write(tmp / "a.txt", "a b c d e\n");
  write(tmp / "b.txt", "a b d c e\n");
  // bleu --ref twice: two references per line (multi-reference BLEU, nrefs:2), not the last alone.
  Result r = run("bleu --ref " + tmp / "b.txt" + " --ref " + tmp / "a.txt" + " --hyp " + tmp / "a.txt");
  CHECK(r.status == 0);
  CHECK(r.output.find("BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:qkgrad-") != std::string::npos);
  CHECK(r.output.find(" = 100.00 ") != std::string::npos);
  for (const char* command : {"translate", "eval", "score --src a --tgt b", "attention --text a", "grads --src a --tgt b --out g"}) {
    r = run(std::string(command) + " --run x --checkpoint best --checkpoint last");
    INFO(command << ": " << r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("--checkpoint given 2 times ('best', 'last')") != std::string::npos);
    const bool decodes = std::string(command) == "translate" || std::string(command) == "eval";
    CHECK(r.output.find(decodes ? "an ensemble is one list: --checkpoint A,B" : "`average` them") != std::string::npos);
  }
  // A recipe flag given twice takes its last value (scripts override their own flags so).
  r = run("bleu --ref " + tmp / "a.txt" + " --hyp " + tmp / "a.txt" + " --tokenize 13a --tokenize none");
  CHECK(r.status == 0);
  CHECK(r.output.find(" = 100.00 100.0/100.0/100.0/100.0") != std::string::npos);
  CHECK(r.output.find("tok:none") != std::string::npos);
}

TEST_CASE("the commands that run a model take --threads, as train does", "[cli]") {
  for (const char* command : {"translate", "eval", "score", "grads", "attention", "attention-stats"}) {
    INFO(command);
    Result r = run(std::string(command) + " --help");
    CHECK(r.output.find("--threads N=all") != std::string::npos);
    r = run(std::string(command) + " --threads 0");
    CHECK(r.status == 2);
    CHECK(r.output.find("--threads: must be between 1 and 4096, got 0") != std::string::npos);
  }
}

TEST_CASE("a mistyped flag gets the nearest one; a language the corpus lacks gets the ones it has", "[cli]") {
  Result r = run("train --max-step 3 --run x");
  CHECK(r.status == 2);
  CHECK(r.output.find("--max-step; did you mean --max-steps?") != std::string::npos);
  r = run("translate --run x --beem 3");
  CHECK(r.output.find("did you mean --beam?") != std::string::npos);
  r = run("translate --run x --frobnicate");  // nothing close: no guess
  CHECK(r.status == 2);
  CHECK(r.output.find("did you mean") == std::string::npos);
  r = run("train --inject-nan-at-stepp 3 --run x");  // a hidden flag is never suggested
  CHECK(r.output.find("did you mean") == std::string::npos);
  TempDir tmp;
  write_corpus(tmp.path, 50);
  r = run("train --data " + tmp.path + " --src xx --tgt en --run " + tmp / "run");
  CHECK(r.status == 2);
  CHECK(r.output.find("--src xx: " + tmp.path + " has no train.xx; its languages are en, es") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "run"));
}

TEST_CASE("train's --help: hidden test flags stay hidden but are named in their errors; inferred values show no default",
          "[cli]") {
  const Result help = run("train --help");
  REQUIRE(help.status == 0);
  CHECK(help.output.find("inject") == std::string::npos);
  CHECK(help.output.find("hidden") == std::string::npos);
  CHECK(help.output.find("--src TEXT ") != std::string::npos);  // not "--src TEXT=es": a new run infers it
  CHECK(help.output.find("--tgt TEXT=") == std::string::npos);
  CHECK(help.output.find("presets (--preset") != std::string::npos);  // the footer is still there
  Result r = run("train --inject-nan-at-step -1 --run x");
  CHECK(r.status == 2);
  CHECK(r.output.find("train: --inject-nan-at-step: must be between 0 and") != std::string::npos);
  r = run("train --inject-rank-death-at-step x --run x");
  CHECK(r.status == 2);
  CHECK(r.output.find("--inject-rank-death-at-step: needs an integer") != std::string::npos);
}

TEST_CASE("bad input gives a clear message and a non-zero status, never a crash", "[cli][errors]") {
  TempDir tmp;
  Result r = run("translate --run " + tmp / "nope" + " --beam -1");
  CHECK(r.status == 2);
  CHECK(r.output.find("--beam: must be between 1 and 64, got -1") != std::string::npos);
  r = run("train --data " + tmp.path + " --run " + tmp / "run" + " --batch-tokens 0");
  CHECK(r.status == 2);
  CHECK(r.output.find("--batch-tokens: must be between") != std::string::npos);
  r = run("train --data " + tmp.path + " --run " + tmp / "run" + " --colour blue");
  CHECK(r.status == 2);
  CHECK(r.output.find("were not expected: blue --colour") != std::string::npos);
  r = run("translate --run " + tmp / "nope");
  CHECK(r.status == 1);
  CHECK(r.output.find("does not exist") != std::string::npos);
  write(tmp / "train.es", "uno\ndos\n");
  write(tmp / "train.en", "one\n");
  r = run("train --data " + tmp.path + " --run " + tmp / "run" + " --preset tiny");
  CHECK(r.status == 1);
  CHECK(r.output.find("has 2 lines but") != std::string::npos);
  write(tmp / "ref.txt", "a b c d e\nf g h i j\n");
  write(tmp / "hyp.txt", "a b c d e\n");
  r = run("bleu --ref " + tmp / "ref.txt" + " --hyp " + tmp / "hyp.txt");
  CHECK(r.status == 1);
  CHECK(r.output.find("1 lines but") != std::string::npos);
  write(tmp / "hyp.txt", "a b c d e\nf g \xff\n");
  r = run("bleu --ref " + tmp / "ref.txt" + " --hyp " + tmp / "hyp.txt");
  CHECK(r.status == 1);
  CHECK(r.output.find("hyp.txt:2: invalid UTF-8") != std::string::npos);
  write(tmp / "hyp.txt", "a b c d e\nf g h i j\n");
  r = run("bleu --ref " + tmp / "ref.txt" + " --hyp " + tmp / "hyp.txt");
  CHECK(r.status == 0);
  CHECK(r.output.find("|version:qkgrad-0.1.0 = 100.00 100.0/100.0/100.0/100.0") != std::string::npos);
}

TEST_CASE("Ctrl-C during training saves a checkpoint; --resume continues from it", "[cli][slow]") {
  TempDir tmp;
  write_corpus(tmp.path, 400);
  const std::string args = "train --data " + tmp.path + " --run " + tmp / "run" +
                           " --preset tiny --vocab-size 30 --max-steps 100000 --eval-every 100000 --threads 1";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDOUT_FILENO);
    ::dup2(null_fd, STDERR_FILENO);
    ::execl("/bin/sh", "sh", "-c", ("exec " + kProgram + " " + args).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait until it is training (metrics appear every 50 steps), then interrupt it.
  for (int i = 0; i < 600 && !fs::exists(tmp / "run/metrics.jsonl"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(fs::exists(tmp / "run/metrics.jsonl"));
  ::kill(child, SIGINT);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 130);
  REQUIRE(qkgrad::checkpoint_exists(tmp / "run/checkpoints/last"));
  const int64_t stopped_at = qkgrad::load_trainer_state(tmp / "run/checkpoints/last").get_int("step");
  CHECK(stopped_at >= 50);
  const Result resumed = run("train --data " + tmp.path + " --run " + tmp / "run" +
                             " --preset tiny --vocab-size 30 --max-steps " + std::to_string(stopped_at + 10) +
                             " --eval-every 100000 --threads 1 --resume");
  INFO(resumed.output);
  CHECK(resumed.status == 0);
  CHECK(resumed.output.find("resumed from") != std::string::npos);
  CHECK(qkgrad::load_trainer_state(tmp / "run/checkpoints/last").get_int("step") == stopped_at + 10);
}

TEST_CASE("the NaN guard: stop saves the last good state; skip counts and continues", "[cli][errors]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string base = "train --data " + tmp.path + " --preset tiny --vocab-size 30 --eval-every 100000 --threads 1";
  Result r = run(base + " --run " + tmp / "stop" + " --max-steps 20 --inject-nan-at-step 7");
  CHECK(r.status == 1);
  CHECK(r.output.find("step 7 (epoch ") != std::string::npos);
  CHECK(r.output.find("the loss is not finite") != std::string::npos);
  CHECK(r.output.find("Nothing was updated") != std::string::npos);
  REQUIRE(qkgrad::checkpoint_exists(tmp / "stop/checkpoints/last"));
  CHECK(qkgrad::load_trainer_state(tmp / "stop/checkpoints/last").get_int("step") == 6);
  // Resuming (here without the injected NaN) continues from the last good state.
  r = run(base + " --run " + tmp / "stop" + " --max-steps 20 --resume");
  CHECK(r.status == 0);
  CHECK(qkgrad::load_trainer_state(tmp / "stop/checkpoints/last").get_int("step") == 20);

  r = run(base + " --run " + tmp / "skip" + " --max-steps 20 --inject-nan-at-step 7 --on-nan skip");
  CHECK(r.status == 0);
  CHECK(r.output.find("skipped step 7") != std::string::npos);
  const qkgrad::TrainerState st = qkgrad::load_trainer_state(tmp / "skip/checkpoints/last");
  CHECK(st.get_int("step") == 20);
  CHECK(st.get_int("skipped_batches") == 1);
}

TEST_CASE("attention-stats: one line per attention module, printed and as JSON lines", "[cli]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  Result r = run("train --data " + tmp.path + " --run " + tmp / "run" +
                 " --preset tiny --vocab-size 30 --max-steps 10 --eval-every 100000 --threads 1");
  REQUIRE(r.status == 0);
  r = run("attention-stats --run " + tmp / "run" + " --split test --sentences 50 --out " + tmp / "stats.jsonl");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("test ") != std::string::npos);
  CHECK(r.output.find("50 sentence pairs") != std::string::npos);
  CHECK(r.output.find("decoder.layers.0.cross_attn") != std::string::npos);
  std::ifstream in(tmp / "stats.jsonl");
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    CHECK(line.find("\"module\":") != std::string::npos);
    CHECK(line.find("\"saturated_fraction\":") != std::string::npos);
  }
  const qkgrad::Json config = qkgrad::parse_json(read(tmp / "run/checkpoints/last/config.json"), "config.json");
  // encoder self per encoder layer; decoder self + cross per decoder layer
  const qkgrad::JsonFields model = qkgrad::JsonFields(config, "config.json").object("model");
  CHECK(lines == model.integer("encoder_layers") + 2 * model.integer("decoder_layers"));
  r = run("attention-stats --run " + tmp / "nope");
  CHECK(r.status == 1);
  CHECK(r.output.find("does not exist") != std::string::npos);
}

TEST_CASE("--device: cpu works as before; cuda where CUDA cannot run is a usage error that creates nothing",
          "[cli][errors]") {
  TempDir tmp;
  write_corpus(tmp.path, 200);
  const std::string base = "train --data " + tmp.path +
                           " --preset tiny --vocab-size 30 --max-steps 10 --eval-every 100000 --threads 1";
  const std::vector<std::string> model_commands = {"train", "translate", "eval", "grads", "attention",
                                                   "attention-stats"};
  for (const std::string& command : model_commands) {
    const Result r = run(command + " --help");
    INFO(command << ": " << r.output);
    CHECK(r.output.find("--device cpu|cuda") != std::string::npos);
  }

  // The argument parser refuses anything but cpu and cuda.
  Result r = run(base + " --run " + tmp / "bad" + " --device nonsense");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.find("--device: must be one of cpu|cuda, got 'nonsense'") != std::string::npos);
  CHECK_FALSE(fs::exists(tmp / "bad"));

  // cuda without CUDA support (or, in a CUDA build, without a GPU): the backend's explanation,
  // at once, with the status of a bad option, and no run directory.
  if (!qkgrad::cuda_available()) {
    const std::string why = qkgrad::cuda_info().built
                                ? "qkgrad was built with CUDA but this machine cannot run it"
                                : "device cuda: qkgrad was built without CUDA support; reconfigure with";
    r = run(base + " --run " + tmp / "gpu" + " --device cuda");
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(r.output.find("qkgrad-translate train: ") != std::string::npos);
    CHECK(r.output.find(why) != std::string::npos);
    CHECK_FALSE(fs::exists(tmp / "gpu"));
    const std::string gpu_run = " --run " + tmp / "gpu";
    for (const std::string& args : {"translate" + gpu_run, "eval" + gpu_run, "attention-stats" + gpu_run,
                                    "attention" + gpu_run + " --text uno",
                                    "grads" + gpu_run + " --src x --tgt x --out " + tmp / "out"}) {
      r = run(args + " --device cuda");
      INFO(args << ": " << r.output);
      CHECK(r.status == 2);
      CHECK(r.output.find(why) != std::string::npos);
      CHECK_FALSE(fs::exists(tmp / "gpu"));
      CHECK_FALSE(fs::exists(tmp / "out"));
    }
  }

  // --device cpu: the default, recorded in options.json.
  r = run(base + " --run " + tmp / "run" + " --device cpu");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("attention, on cpu, 1 thread;") != std::string::npos);  // --threads 1 of base
  const qkgrad::Json options = qkgrad::parse_json(read(tmp / "run/options.json"), "options.json");
  CHECK(options.at("device") == "cpu");
  write(tmp / "in.txt", "uno dos\ntres\n");
  const Result plain = run("translate --run " + tmp / "run" + " --input " + tmp / "in.txt");
  const Result on_cpu = run("translate --run " + tmp / "run" + " --input " + tmp / "in.txt" + " --device cpu");
  REQUIRE(plain.status == 0);
  REQUIRE(on_cpu.status == 0);
  CHECK(on_cpu.output == plain.output);
  r = run("eval --run " + tmp / "run" + " --split test --device cpu");
  CHECK(r.status == 0);
  r = run("attention-stats --run " + tmp / "run" + " --split test --sentences 20 --device cpu");
  CHECK(r.status == 0);

  // The device is not part of the model: a run whose options.json says it was trained on a GPU
  // resumes (and translates) on the CPU.
  qkgrad::Json trained_on_gpu = options;
  trained_on_gpu["device"] = "cuda";
  write(tmp / "run/options.json", qkgrad::dump_json(trained_on_gpu, 2) + "\n");
  r = run("train --data " + tmp.path + " --run " + tmp / "run" +
          " --preset tiny --vocab-size 30 --max-steps 12 --eval-every 100000 --threads 1 --device cpu --resume");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("resumed from") != std::string::npos);
  CHECK(qkgrad::load_trainer_state(tmp / "run/checkpoints/last").get_int("step") == 12);
}

TEST_CASE("bleu scores as sacreBLEU does: several references, --lowercase, sentence level, bare numbers, JSON",
          "[cli]") {
  TempDir tmp;
  write(tmp / "hyp.txt", "a b c d\nThe Cat Sat On The Mat\n");
  write(tmp / "r1.txt", "a b x y\nthe cat sat on the mat\n");
  write(tmp / "r2.txt", "x b c d e\nA dog\n");
  const std::string files = " --hyp " + tmp / "hyp.txt" + " --ref " + tmp / "r1.txt";
  // Two references: nrefs:2 in both signatures; more matches than against either alone.
  Result one = run("bleu --score-only --metrics bleu" + files);
  Result two = run("bleu --score-only --metrics bleu" + files + " --ref " + tmp / "r2.txt");
  REQUIRE(one.status == 0);
  REQUIRE(two.status == 0);
  CHECK(std::stod(two.output) > std::stod(one.output));
  Result r = run("bleu" + files + " --ref " + tmp / "r2.txt");
  CHECK(r.output.find("BLEU|nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:qkgrad-") == 0);
  CHECK(r.output.find("\nchrF2|nrefs:2|case:mixed|eff:yes|nc:6|nw:0|space:no|version:qkgrad-") != std::string::npos);
  // --lowercase: the second line matches; the signature says case:lc.
  r = run("bleu --lowercase --sentence-level" + files);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("BLEU|nrefs:1|case:lc|eff:yes|") == 0);
  CHECK(r.output.find("|version:qkgrad-0.1.0 = 100.00 100.0/100.0/100.0/100.0") != std::string::npos);
  // Sentence level: one line per hypothesis.
  r = run("bleu --sentence-level --metrics chrf --score-only" + files);
  CHECK(r.status == 0);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 2);
  r = run("bleu --sentence-level --metrics bleu,chrf" + files);
  CHECK(r.status == 1);
  CHECK(r.output.find("one metric at a time") != std::string::npos);
  // JSON: sacreBLEU's fields, an array for two metrics.
  r = run("bleu --format json" + files + " 2>/dev/null");
  REQUIRE(r.status == 0);
  const qkgrad::Json j = qkgrad::Json::parse(r.output);
  CHECK(j.size() == 2);
  CHECK(j[0]["name"] == "BLEU");
  CHECK(j[0]["case"] == "mixed");
  CHECK(j[1]["name"] == "chrF2");
  r = run("bleu --metrics ter" + files);
  CHECK(r.status == 2);
  CHECK(r.output.find("--metrics: must be bleu, chrf or bleu,chrf, got 'ter'") != std::string::npos);
  // A reference file of another length is named.
  write(tmp / "r3.txt", "x\n");
  r = run("bleu" + files + " --ref " + tmp / "r3.txt");
  CHECK(r.status == 1);
  CHECK(r.output.find("hyp.txt has 2 lines but " + tmp / "r3.txt" + " has 1") != std::string::npos);
}
