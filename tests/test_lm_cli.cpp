// qkgrad-lm end to end: train, resume (exactly), eval, generate, --config and --dump-config, and
// the clear errors on bad corpora and flags.
#include <catch2/catch.hpp>

#include "cli_helpers.h"
#include "io/json.h"

using namespace qkgrad::test_cli;
using Catch::Matchers::Contains;

namespace {

const std::string kLm = std::string(QKGRAD_BUILD_DIR) + "/examples/qkgrad-lm";

Result lm(const std::string& args) { return run_shell(kLm + " " + args + " 2>&1"); }

// DIR/train.txt, valid.txt, test.txt: counting sentences ("one and two make three.").
void write_text_corpus(const std::string& dir) {
  const char* words[] = {"one", "two", "three", "four", "five", "six", "seven"};
  for (const auto& [split, lines] : {std::pair{"train", 400}, std::pair{"valid", 40}, std::pair{"test", 40}}) {
    std::ofstream out(dir + "/" + split + ".txt");
    for (int i = 0; i < lines; ++i) out << words[i % 7] << " and " << words[(i / 7) % 7] << " make " << words[(i * 3) % 7] << ".\n";
  }
}

const std::string kTiny = "--preset tiny --threads 1 --log-every 10 --eval-every 10 --eval-windows 20";

}  // namespace

TEST_CASE("qkgrad-lm: train, resume exactly, eval and generate", "[lm][cli]") {
  TempDir tmp;
  write_text_corpus(tmp.path);
  const std::string data = "--data " + tmp.path;

  // 20 steps at once, and 10 then 10 more by --resume: the same weights, bit for bit.
  const Result whole = lm("train " + data + " --run " + (tmp / "whole") + " " + kTiny + " --max-steps 20");
  REQUIRE(whole.status == 0);
  CHECK_THAT(whole.output, Contains("eval at step 20: valid loss") && Contains("bits per byte"));
  REQUIRE(lm("train " + data + " --run " + (tmp / "split") + " " + kTiny + " --max-steps 10").status == 0);
  const Result resumed = lm("train --run " + (tmp / "split") + " --resume --max-steps 20 --threads 1");
  REQUIRE(resumed.status == 0);
  CHECK(read(tmp / "whole/checkpoints/last/model.safetensors").size() > 1000);
  // The files carry their save's id in the header; the tensors after it must be the same.
  const std::string a = read(tmp / "whole/checkpoints/last/model.safetensors"), b = read(tmp / "split/checkpoints/last/model.safetensors");
  CHECK(a.substr(a.size() - 60000) == b.substr(b.size() - 60000));
  // A finished run says so; a fixed setting cannot change on resume.
  CHECK_THAT(lm("train --run " + (tmp / "whole") + " --resume").output, Contains("finished"));
  const Result changed = lm("train --run " + (tmp / "whole") + " --resume --context 64 --max-steps 30");
  CHECK(changed.status != 0);
  CHECK_THAT(changed.output, Contains("context"));

  // eval: the test split by default, any text with --text; JSON for scripts.
  const Result eval = lm("eval --run " + (tmp / "whole") + " --json");
  REQUIRE(eval.status == 0);
  const qkgrad::Json j = qkgrad::parse_json(eval.output, "eval --json");
  CHECK(j.at("bytes").get<int64_t>() == static_cast<int64_t>(read(tmp / "test.txt").size()) - 1);
  CHECK(j.at("bits_per_byte").get<double>() == Approx(j.at("loss").get<double>() / std::log(2.0)));
  CHECK(j.at("loss").get<double>() < std::log(256.0));  // it learned something
  write(tmp / "other.txt", "six and seven make one.\n");
  CHECK_THAT(lm("eval --run " + (tmp / "whole") + " --text " + (tmp / "other.txt")).output, Contains("perplexity"));

  // generate: the prompt, then the model's bytes; the same seed gives the same text.
  const Result g1 = lm("generate --run " + (tmp / "whole") + " --prompt 'one and' --max-bytes 30 --seed 4");
  const Result g2 = lm("generate --run " + (tmp / "whole") + " --prompt 'one and' --max-bytes 30 --seed 4");
  REQUIRE(g1.status == 0);
  CHECK(g1.output.rfind("one and", 0) == 0);
  CHECK(g1.output.size() == 7 + 30 + 1);
  CHECK(g1.output == g2.output);
  const Result greedy = lm("generate --run " + (tmp / "whole") + " --temperature 0 --max-bytes 200 --stop-at $'\\n'");
  REQUIRE(greedy.status == 0);
  CHECK(greedy.output.size() <= 202);
}

TEST_CASE("qkgrad-lm: bad corpora, runs and flags are clear errors", "[lm][cli]") {
  TempDir tmp;
  write_text_corpus(tmp.path);
  // A corpus that is not UTF-8: the file, line and column.
  fs::create_directories(tmp / "latin1");
  write(tmp / "latin1/train.txt", "good line\nna\xefve\n");
  write(tmp / "latin1/valid.txt", "fine\n");
  Result r = lm("train --data " + (tmp / "latin1") + " --run " + (tmp / "r1") + " " + kTiny);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("latin1/train.txt (the training text) is not UTF-8 at line 2, column 3"));
  CHECK_FALSE(fs::exists(tmp / "r1/checkpoints"));
  // No valid.txt.
  fs::create_directories(tmp / "novalid");
  write(tmp / "novalid/train.txt", read(tmp / "train.txt"));
  r = lm("train --data " + (tmp / "novalid") + " --run " + (tmp / "r2") + " " + kTiny);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("novalid/valid.txt"));
  // Less text than one window.
  fs::create_directories(tmp / "short");
  write(tmp / "short/train.txt", "hi\n");
  write(tmp / "short/valid.txt", "hi\n");
  r = lm("train --data " + (tmp / "short") + " --run " + (tmp / "r3") + " " + kTiny);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("too few for one window of --context 32"));
  // A validation text of one byte: nothing to predict.
  fs::create_directories(tmp / "onebyte");
  write(tmp / "onebyte/train.txt", read(tmp / "train.txt"));
  write(tmp / "onebyte/valid.txt", "x");
  r = lm("train --data " + (tmp / "onebyte") + " --run " + (tmp / "r7") + " " + kTiny);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("onebyte/valid.txt has 1 byte: nothing to predict; the validation text needs at least 2 bytes"));
  // Usage errors (exit 2), before anything is written.
  r = lm("train --data " + tmp.path + " --run " + (tmp / "r4") + " --preset tiny --heads 3");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("divisible"));
  CHECK_FALSE(fs::exists(tmp / "r4"));
  r = lm("train --data " + tmp.path + " --run " + (tmp / "r5") + " --attention cosine");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("qknorm"));
  CHECK(lm("train --run " + (tmp / "r6")).status == 2);  // no --data
  CHECK(lm("nonsense").status == 2);
  // eval and generate of something that is not a run.
  r = lm("generate --run " + (tmp / "nothing"));
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Contains("nothing"));
  r = lm("eval --run " + tmp.path + " --split dev");
  CHECK(r.status == 2);
  CHECK_THAT(r.output, Contains("train, valid or test"));
}

TEST_CASE("qkgrad-lm train: --dump-config is a --config file that gives the same settings", "[lm][cli]") {
  TempDir tmp;
  const Result dumped = lm("train --preset demo --attention rms_qknorm --lr 0.003 --dump-config");
  REQUIRE(dumped.status == 0);
  CHECK_THAT(dumped.output, Contains("attention = \"rms_qknorm\"") && Contains("# --attention") && Contains("# preset demo"));
  write(tmp / "exp.toml", dumped.output);
  const Result again = lm("train --config " + (tmp / "exp.toml") + " --dump-config");
  REQUIRE(again.status == 0);
  CHECK_THAT(again.output, Contains("lr = 0.003") && Contains("attention = \"rms_qknorm\"") && Contains("context = 128"));
  write(tmp / "bad.toml", "heads = 4\nwarmpu = 3\n");
  const Result bad = lm("train --config " + (tmp / "bad.toml") + " --dump-config");
  CHECK(bad.status == 1);
  CHECK_THAT(bad.output, Contains("bad.toml:2: unknown setting 'warmpu'"));
}
