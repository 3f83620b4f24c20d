// qkgrad-translate train: the settings from a resumed run, a preset, --config and the flags,
// then the training run (translation/trainer.h).
#include "commands.h"

namespace qkgrad::translate_cli {

// What train's flags change, in this order: a resumed run's options.json, or else the preset
// (--preset, else the one --config names, else small); then --config's values. (A lenient
// first pass reads --run, --resume, --config and --preset; the full pass checks them.)
RunSettings train_base_settings(int argc, char** argv, Json& config_file) {
  const std::string run = Args::value_of(argc, argv, 2, "run", "");
  const std::string config = Args::value_of(argc, argv, 2, "config", "");
  config_file = config.empty() ? Json::object() : read_config_file(config);
  const Json& file = config_file;
  RunSettings s;
  if (Args::has_flag(argc, argv, 2, "resume") && !run.empty()) {
    const RunDir rd{run};
    QKGRAD_CHECK(std::filesystem::exists(rd.options()), "train --resume: ", rd.options(), " does not exist, so ", run,
                 " is not a training run; drop --resume to start one");
    s = load_run_settings(rd.options());
  } else {
    const std::string named = file.contains("preset") ? file.at("preset").get<std::string>() : "small";
    const std::string preset = Args::value_of(argc, argv, 2, "preset", named);
    s = preset_settings(is_preset(preset) ? preset : "small");  // an unknown one: the full pass says so
  }
  return from_json(file, config, s);
}

// The language pairs of DATA: the suffixes X of its DATA/train.X files.
std::vector<std::string> train_languages(const std::string& data) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("train.", 0) != 0 || name.size() <= 6) continue;  // reading checks the kind of file
    std::string lang = name.substr(6);
    if (lang.size() > 3 && lang.compare(lang.size() - 3, 3, ".gz") == 0) lang.resize(lang.size() - 3);
    if (std::find(found.begin(), found.end(), lang) == found.end()) found.push_back(lang);
  }
  std::sort(found.begin(), found.end());
  return found;
}

// --src and --tgt where they were not given (nor set by --config): a new run's pair must be
// in DATA. One given: the other is DATA's only other language. Neither: the defaults es → en
// if DATA holds exactly those, otherwise DATA's languages are named and both must be given
// (a direction cannot be guessed).
void infer_languages(RunSettings& s, bool src_given, bool tgt_given) {
  const std::vector<std::string> langs = train_languages(s.data_dir);
  if (langs.size() < 2) return;  // not even a pair: reading the corpus says what is missing
  // A language given that DATA does not have: name the ones it has.
  for (const auto& [given, flag, lang] : {std::tuple{src_given, "--src", s.src}, std::tuple{tgt_given, "--tgt", s.tgt}}) {
    if (given && std::find(langs.begin(), langs.end(), lang) == langs.end()) {
      throw UsageError(cat("qkgrad-translate train: ", flag, " ", lang, ": ", s.data_dir, " has no train.", lang,
                           "; its languages are ", join(langs, ", "), " (train.", join(langs, ", train."), ")"));
    }
  }
  if (src_given && tgt_given) return;
  auto other_than = [&](const std::string& lang) {
    std::vector<std::string> rest;
    for (const auto& l : langs) if (l != lang) rest.push_back(l);
    return rest;
  };
  const std::string have = cat(s.data_dir, " has train.", join(langs, ", train."));
  if (src_given || tgt_given) {
    std::string& missing = src_given ? s.tgt : s.src;
    const std::vector<std::string> rest = other_than(src_given ? s.src : s.tgt);
    if (rest.size() != 1) {
      throw UsageError(cat("qkgrad-translate train: ", src_given ? "--tgt" : "--src", " cannot be inferred: ", have,
                           "; give it"));
    }
    missing = rest.front();
    return;
  }
  const RunSettings defaults;
  if (langs == std::vector<std::string>{std::min(defaults.src, defaults.tgt), std::max(defaults.src, defaults.tgt)}) return;
  throw UsageError(cat("qkgrad-translate train: ", have, "; say which is the source and which the target with --src and --tgt",
                       langs.size() == 2 ? cat(" (e.g. --src ", langs[0], " --tgt ", langs[1], ")") : std::string()));
}

int cmd_train(int argc, char** argv) {
  TrainOptions o;
  Json config_file;
  o.settings = train_base_settings(argc, argv, config_file);
  RunSettings& s = o.settings;
  std::string config;
  bool dump_config = false;
  Args args("qkgrad-translate train",
            "Trains a joint SentencePiece model (unless RUNDIR has one) and an encoder-decoder Transformer on\n"
            "DATA/train.{SRC,TGT}, evaluating dev BLEU on DATA/dev.{SRC,TGT}; keeps RUNDIR/checkpoints/{best,last}.\n"
            "Settings come from the preset, then --config, then the flags (--help shows the result as defaults).\n"
            "`train --run R --resume` continues R with its options.json; flags given with it change those\n"
            "settings that may change (printed, and stored for the next resume) and are refused for the others.\n"
            "Ctrl-C, SIGTERM or SIGHUP saves a resumable checkpoint; --resume continues exactly (a finished run\n"
            "says so and exits 0). One process per run directory: a second one is refused.");
  args.option("config", "settings file: TOML with the keys of options.json (see --dump-config), or a run's options.json",
              &config);
  args.flag("dump-config", "print the resolved settings in --config's form and exit", &dump_config);
  CLI::Option* data_flag = args.option("data", "directory with train/dev/test.{SRC,TGT} (required for a new run)", &s.data_dir);
  // No default shown: a new run infers them from DATA (--dump-config shows what it would use).
  CLI::Option* src_flag = args.option("src", "source language suffix (default: inferred from DATA/train.*)", &s.src)
                              ->default_str("");
  CLI::Option* tgt_flag = args.option("tgt", "target language suffix (default: inferred from DATA/train.*)", &s.tgt)
                              ->default_str("");
  args.option("run", "run directory (created; required unless --dump-config)", &o.run_dir);
  // A setting's flag: its range or choices are those of its key in the settings table. Each
  // key's flags are remembered, for --dump-config to say where a value came from.
  std::map<std::string, std::vector<CLI::Option*>> flags_of_key = {{"src", {src_flag}}, {"tgt", {tgt_flag}}};
  auto setting = [&](const std::string& flag, const char* key, const std::string& help, auto* target) {
    const Allowed allowed = allowed_values(key);
    using T = std::remove_pointer_t<decltype(target)>;
    CLI::Option* option = nullptr;
    if constexpr (std::is_same_v<T, std::string>) {
      option = args.choice(flag, help, target, allowed.choices);
    } else if constexpr (std::is_same_v<T, double>) {
      option = args.option(flag, help, target, allowed.min, allowed.max);
    } else {
      option = args.option(flag, help, target, static_cast<int64_t>(allowed.min), static_cast<int64_t>(allowed.max));
    }
    flags_of_key[key].push_back(option);
    return option;
  };
  setting("attn", "attention", "attention: qknorm (the paper), scaled_dot, rms_qknorm (RMSNorm of each head's q and k, learned gains: OLMo 2, Qwen 3) or layer_qknorm (LayerNorm per head: ViT-22B)", &s.attention);
  setting("norm", "norm", "normalisation", &s.norm);
  setting("qknorm-gain", "qknorm_gain", "QKNorm's learned g: one per attention module (the paper) or one per head (rms_qknorm, layer_qknorm: the norms' gains [d] shared by the heads, or [H, d])", &s.qknorm_gain);
  setting("fixnorm", "fixnorm", "FixNorm: the tied embeddings at unit length (the paper) or not", &s.fixnorm);
  setting("dtype", "dtype", "float type of the model: f32, or f64 (several times slower; for exact cross-checks)", &s.dtype);
  setting("preset", "preset", "model size and recipe (the defaults below are its values)", &s.preset);
  setting("max-minutes", "max_minutes", "time budget: training minutes of the run, resumes included (0: none)", &s.max_minutes);
  setting("max-steps", "max_steps", "step budget", &s.max_steps);
  setting("seed", "seed", "seed for subwords, initialisation, dropout and data order", &s.seed);
  setting("layers", "layers", "encoder and decoder layers", &s.layers);
  setting("d-model", "d_model", "model width", &s.d_model);
  setting("heads", "heads", "attention heads", &s.heads);
  setting("ffn", "ffn", "feed-forward width", &s.ffn);
  const Allowed rate = allowed_values("dropout");
  CLI::Option* dropout_flag = args.option(
      "dropout", "every dropout rate at once (residual, attention, feed-forward, word)", s.dropout,
      [&](double p) { s.dropout = s.attention_dropout = s.ffn_dropout = s.word_dropout = p; }, rate.min, rate.max);
  for (const char* key : {"dropout", "attention_dropout", "ffn_dropout", "word_dropout"}) flags_of_key[key].push_back(dropout_flag);
  flags_of_key["data"].push_back(data_flag);
  setting("vocab-size", "vocab_size", "subword vocabulary size", &s.vocab_size);
  setting("batch-tokens", "batch_tokens", "padded tokens per batch", &s.batch_tokens);
  setting("precision", "precision", "f32, or bf16: the linear layers multiply bf16 operands with f32 accumulation "
          "(mixed precision; master weights, gradients and Adam stay f32; needs a CPU with AVX512_BF16 or AMX)", &s.precision);
  setting("accumulate", "accumulate", "run each batch as K micro-batches with their gradients summed (the same update, a K-th of the activation memory)", &s.accumulate);
  setting("lr", "lr", "peak learning rate", &s.lr);
  setting("warmup", "warmup", "warmup steps", &s.warmup);
  setting("schedule", "schedule", "learning-rate schedule after warmup: plateau = flat, x0.8 when the dev --best-metric stalls 3 times (the paper: BLEU); cosine = decay to 0 at --max-steps", &s.schedule);
  setting("eval-every", "eval_every", "steps between dev evaluations", &s.eval_every);
  setting("log-every", "log_every", "steps between log lines (timestamped; on a terminal a live bar runs between them)", &s.log_every);
  setting("eval-sentences", "eval_sentences", "dev sentences translated at each evaluation (0: all)", &s.eval_sentences);
  setting("patience", "patience", "stop after this many evaluations without a better dev --best-metric", &s.patience);
  setting("label-smoothing", "label_smoothing", "label smoothing epsilon", &s.label_smoothing);
  setting("clip", "clip", "global gradient-norm clip", &s.clip);
  setting("beam", "beam", "beam size for dev BLEU", &s.beam);
  setting("alpha", "alpha", "length penalty for dev BLEU", &s.alpha);
  setting("max-length", "max_length", "drop training pairs longer than this many subwords", &s.max_length);
  setting("bleu-tokenize", "bleu_tokenize", "BLEU tokenisation (none for pre-tokenised data)", &s.bleu_tokenize);
  setting("best-metric", "best_metric", "the dev value that picks checkpoints/best, counts --patience and drives the plateau schedule", &s.best_metric);
  setting("keep-last", "keep_last", "also keep the last K saves as RUNDIR/checkpoints/step-N (for `average`; 0: none)", &s.keep_last);
  args.choice("device", kDeviceHelp, &s.device, kDeviceChoices);
  args.option("threads", "CPU threads (default: all)", &o.threads, 1, 4096);
  setting("save-every", "save_every", "also save RUNDIR/checkpoints/last every N steps (0: at evaluations only)", &s.save_every);
  args.flag("resume", "continue the run in --run from its last checkpoint", &o.resume);
  Args::hidden(args.option("inject-nan-at-step", "testing: pretend the loss of this step is NaN", &o.inject_nan_at_step, 0,
                           int64_t{1} << 40));  // for the tests of the NaN guard
  Args::hidden(args.option("inject-rank-death-at-step", "testing: the last rank of a data-parallel job kills itself at this step",
                           &o.inject_rank_death_at_step, 0, int64_t{1} << 40));  // for the tests of a rank's death
  args.choice("on-nan", "a non-finite loss or gradient: stop (after saving the last good state) or skip the batch", &o.on_nan, {"stop", "skip"});
  args.footer(presets_table());
  if (!args.parse(argc, argv, 2)) return 0;
  const bool src_given = src_flag->count() > 0 || config_file.contains("src");
  const bool tgt_given = tgt_flag->count() > 0 || config_file.contains("tgt");
  // A new run's languages, where not given, come from DATA: before --dump-config too, which
  // prints what the run would use.
  if (!o.resume && !s.data_dir.empty()) infer_languages(s, src_given, tgt_given);
  if (dump_config) {
    // Where each value came from: the last of the preset, --config, a flag (or DATA's files).
    const std::string base = o.resume ? cat(RunDir{o.run_dir}.options(), " (--resume)")
                                      : cat("preset ", Args::value_of(argc, argv, 2, "preset",
                                                                      config_file.contains("preset") ? config_file.at("preset").get<std::string>() : "small"));
    std::map<std::string, std::string> origin;
    const Json resolved = to_json(s);
    for (const auto& item : resolved.items()) {
      const std::string& key = item.key();
      origin[key] = base;
      if (config_file.contains(key)) origin[key] = cat("--config ", config);
      for (const CLI::Option* flag : flags_of_key[key]) {
        if (flag->count() > 0) origin[key] = flag->get_name();
      }
    }
    if (!o.resume && !s.data_dir.empty()) {
      if (!src_given) origin["src"] = cat("inferred from ", s.data_dir, "/train.*");
      if (!tgt_given) origin["tgt"] = cat("inferred from ", s.data_dir, "/train.*");
    } else if (!o.resume) {
      if (!src_given) origin["src"] = "the default; a run infers it from --data";
      if (!tgt_given) origin["tgt"] = "the default; a run infers it from --data";
    }
    std::fputs(to_config_text(s, origin).c_str(), stdout);
    return 0;
  }
  if (o.run_dir.empty()) throw UsageError("qkgrad-translate train: --run is required (see --help)");
  if (s.data_dir.empty()) {
    throw UsageError("qkgrad-translate train: --data is required for a new run (or data = \"DIR\" in --config; see --help)");
  }
  return g_comm != nullptr ? train(o, *g_comm) : train(o);
}

}  // namespace qkgrad::translate_cli
