// translation/settings.h: a run's settings in one struct. The presets are its values,
// options.json is its one JSON mapping (every field, read back exactly, older files keeping
// their preset's values for keys they lack), and the model's TransformerConfig derives from it.
#include <catch2/catch.hpp>

#include "cli_helpers.h"
#include "core/error.h"
#include "translation/settings.h"

using namespace qkgrad;
using namespace qkgrad::translation;
using qkgrad::test_cli::TempDir;
using qkgrad::test_cli::write;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

TEST_CASE("settings: the presets are values of the one struct", "[settings]") {
  const RunSettings paper = preset_settings("paper");
  CHECK(paper.preset == "paper");
  CHECK(paper.schedule == "decline");  // its code's rule for the x0.8
  CHECK(paper.layers == 4);
  CHECK(paper.d_model == 512);
  CHECK(paper.ffn == 2048);
  CHECK(paper.dropout == 0.4);
  CHECK(paper.attention_dropout == 0.4);
  CHECK(paper.word_dropout == 0.1);  // the paper's gl→en word dropout
  CHECK(paper.lr == Approx(4.94e-4).epsilon(1e-3));  // the peak of its code's warm-up, (d · 8000)^-0.5
  CHECK(paper.stop_lr == 5e-5);
  CHECK(paper.max_length == 79);
  CHECK(paper.src == "es");           // what no preset sets keeps the struct's default
  const RunSettings demo = preset_settings("demo");
  CHECK(demo.schedule == "cosine");
  CHECK(demo.max_minutes == 17);
  for (const std::string& name : kPresets) CHECK(is_preset(name));
  CHECK_FALSE(is_preset("huge"));
  CHECK_THROWS_WITH(preset_settings("huge"), Contains("unknown preset 'huge' (choose tiny, demo, small or paper)"));
}

TEST_CASE("settings: options.json holds every setting and reads back to the same settings", "[settings]") {
  RunSettings s = preset_settings("tiny");
  s.data = "/data/ted/";
  s.lr = 1.0 / 3.0;  // not a short decimal: read back exactly
  s.seed = (int64_t{1} << 62) + 1;  // beyond 2^53: an exact integer
  s.bleu_tokenize = "none";
  s.beam = 7;
  s.max_minutes = 2.5;
  const Json j = to_json(s);
  std::size_t settings = 0;  // of the tables, the model's hyperparameters included
  RunSettings::for_each(s, [&](const SettingInfo&, const auto&) { ++settings; });
  CHECK(settings >= 41);    // as many as there were when every setting was first stored
  CHECK(j.size() == settings);
  CHECK(j.at("data") == "/data/ted");  // absolute, no trailing slash
  CHECK(j.at("bleu_tokenize") == "none");
  const RunSettings back = from_json(parse_json(dump_json(j, 2), "options.json"), "options.json");
  CHECK(to_json(back) == j);
  CHECK(back.lr == s.lr);
  CHECK(back.seed == s.seed);
  CHECK(back.beam == 7);

  // Relative data directories are stored absolute.
  s.data = "corpora/../bible";
  const std::string stored = to_json(s).at("data").get<std::string>();
  CHECK(stored.front() == '/');
  CHECK_THAT(stored, Contains("/bible") && !Contains(".."));
}

TEST_CASE("settings: an older options.json keeps its preset's values for the keys it lacks", "[settings]") {
  TempDir tmp;
  // The twenty keys qkgrad wrote before every setting was stored.
  write(tmp / "options.json", R"({"data": "/d", "src": "gl", "tgt": "en", "attention": "scaled_dot", "norm": "layer_norm",
    "preset": "tiny", "layers": 2, "d_model": 64, "heads": 4, "ffn": 128, "dropout": 0.3, "vocab_size": 300,
    "batch_tokens": 500, "lr": 0.002, "warmup": 50, "schedule": "plateau", "label_smoothing": 0.1,
    "max_length": 100, "seed": 3, "device": "cpu"})");
  const RunSettings s = load_run_settings(tmp / "options.json");
  CHECK(s.src == "gl");
  CHECK(s.attention == AttentionMode::scaled_dot);
  CHECK(s.d_model == 64);
  CHECK(s.dropout == 0.3);
  CHECK(s.max_steps == preset_settings("tiny").max_steps);  // absent: tiny's
  CHECK(s.eval_sentences == preset_settings("tiny").eval_sentences);
  CHECK(s.bleu_tokenize == "13a");
  // --stop-lr came later than the paper preset's runs: one without it had no such stop.
  write(tmp / "paper.json", R"({"data": "/d", "src": "gl", "tgt": "en", "preset": "paper", "lr": 0.001})");
  CHECK(load_run_settings(tmp / "paper.json").stop_lr == 0);
  CHECK(load_run_settings(tmp / "paper.json").max_length == 79);  // other absent keys: the preset's
  // A run from before --batch-sort and --subword-model had what qkgrad did then (whatever a
  // preset may later choose: these keys are fixed on resume).
  CHECK(load_run_settings(tmp / "paper.json").batch_sort == "target");
  CHECK(load_run_settings(tmp / "paper.json").subword_model == "unigram");

  // Wrong kinds and unknown presets name the file and the key.
  write(tmp / "bad.json", R"({"preset": "tiny", "lr": "fast"})");
  CHECK_THROWS_WITH(load_run_settings(tmp / "bad.json"),
                    Equals(tmp / "bad.json" + ": 'lr' must be a number, got \"fast\" (a string)"));
  write(tmp / "bad.json", R"({"preset": "tiny", "layers": 2.5})");
  CHECK_THROWS_WITH(load_run_settings(tmp / "bad.json"), Contains("'layers' must be an integer"));
  write(tmp / "bad.json", R"({"preset": "giant"})");
  CHECK_THROWS_WITH(load_run_settings(tmp / "bad.json"), Contains("bad.json: unknown preset 'giant'"));
  write(tmp / "bad.json", R"([1, 2])");
  CHECK_THROWS_WITH(load_run_settings(tmp / "bad.json"), Contains("bad.json: the file must be a JSON object"));
  CHECK_THROWS_WITH(load_run_settings(tmp / "missing.json"), Contains("missing.json"));
}

TEST_CASE("settings: what a resume must keep, and the model derived in one place", "[settings]") {
  for (const char* key : {"data", "src", "tgt", "max_length", "preset", "attention", "norm", "layers", "d_model", "heads",
                          "ffn", "vocab_size", "batch_tokens", "seed"}) {
    CHECK(fixed_on_resume(key));
  }
  for (const char* key : {"lr", "warmup", "schedule", "dropout", "word_dropout", "label_smoothing", "clip", "max_steps",
                          "max_minutes", "eval_every", "patience", "beam", "alpha", "bleu_tokenize", "device"}) {
    CHECK_FALSE(fixed_on_resume(key));
  }

  RunSettings s = preset_settings("small");
  s.attention = AttentionMode::scaled_dot;
  s.norm = NormType::scale_norm;
  s.word_dropout = 0.2;
  s.seed = 9;
  const TransformerConfig c = model_config(s, 1234, "sp:abc", 37.5);
  CHECK(c.vocab == 1234);
  CHECK(c.vocabulary_id == "sp:abc");
  CHECK(c.encoder_layers == s.layers);
  CHECK(c.decoder_layers == s.layers);
  CHECK(c.d_model == s.d_model);
  CHECK(c.heads == s.heads);
  CHECK(c.ffn == s.ffn);
  CHECK(c.attention == AttentionMode::scaled_dot);
  CHECK(c.norm == NormType::scale_norm);
  CHECK(c.word_dropout == 0.2);
  CHECK(c.qknorm_length == 37.5);
  CHECK(c.seed == 9);
  CHECK(model_config(s, 1234, "", 1.0).qknorm_length == 2.0);  // L >= 2, so that g0 = log2(L² − L) is defined
}

TEST_CASE("settings: a config file reads back to the settings it was dumped from; values are checked as flags are",
          "[settings]") {
  TempDir tmp;
  RunSettings s = preset_settings("demo");
  s.data = "/data/with \"quotes\" and spaces";
  s.lr = 1.0 / 3.0;
  s.seed = (int64_t{1} << 62) - 1;
  s.bleu_tokenize = "none";
  write(tmp / "c.toml", to_config_text(s));
  const RunSettings back = from_json(read_config_file(tmp / "c.toml"), tmp / "c.toml", preset_settings("tiny"));
  CHECK(to_json(back) == to_json(s));
  CHECK(back.lr == s.lr);  // exact
  CHECK(back.seed == s.seed);

  // Only the keys the file gives: the others keep the base's values.
  write(tmp / "part.toml", "layers = 5\n");
  const Json part = read_config_file(tmp / "part.toml");
  CHECK(part == Json{{"layers", 5}});
  CHECK(from_json(part, "part.toml", preset_settings("paper")).d_model == 512);

  // A JSON settings file may not hold keys that are no setting.
  write(tmp / "c.json", R"({"layers": 2, "colour": "blue"})");
  CHECK_THROWS_WITH(read_config_file(tmp / "c.json"), Contains("c.json: unknown setting 'colour'"));

  // The ranges and choices are those of the flags, from one table.
  CHECK(allowed_values("layers").min == 1);
  CHECK(allowed_values("layers").max == 64);
  CHECK(allowed_values("schedule").choices == std::vector<std::string>{"plateau", "decline", "cosine", "inverse_sqrt"});
  s.heads = 0;
  CHECK_THROWS_WITH(check_settings(s, "x.json"), Equals("x.json: 'heads' must be between 1 and 256, got 0"));
  CHECK_THROWS_WITH(from_json(Json{{"norm", "rms"}}, ""), Equals("'norm' must be one of layer_norm, scale_norm, rms_norm, got \"rms\""));
}
