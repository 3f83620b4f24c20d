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
  const std::vector<std::string> langs = train_languages(s.data);
  if (langs.size() < 2) return;  // not even a pair: reading the corpus says what is missing
  // A language given that DATA does not have: name the ones it has.
  for (const auto& [given, flag, lang] : {std::tuple{src_given, "--src", s.src}, std::tuple{tgt_given, "--tgt", s.tgt}}) {
    if (given && std::find(langs.begin(), langs.end(), lang) == langs.end()) {
      throw UsageError(cat("qkgrad-translate train: ", flag, " ", lang, ": ", s.data, " has no train.", lang,
                           "; its languages are ", join(langs, ", "), " (train.", join(langs, ", train."), ")"));
    }
  }
  if (src_given && tgt_given) return;
  auto other_than = [&](const std::string& lang) {
    std::vector<std::string> rest;
    for (const auto& l : langs) if (l != lang) rest.push_back(l);
    return rest;
  };
  const std::string have = cat(s.data, " has train.", join(langs, ", train."));
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

using FlagsOfKey = std::map<std::string, std::vector<CLI::Option*>>;

// A flag for each setting, from its table (translation/settings.h, nn/transformer.h), setting
// `s`. Returns each key's flags, for --dump-config to say where a value came from.
FlagsOfKey add_setting_flags(Args& args, RunSettings& s) {
  FlagsOfKey flags_of_key;
  RunSettings::for_each(s, [&](const SettingInfo& info, auto& value) {
    const std::string key = info.key;
    if (key == "dropout") {  // --dropout sets every rate at once
      CLI::Option* all = args.option(
          "dropout", "every dropout rate at once (residual, attention, feed-forward, word)", s.dropout,
          [&s](double p) { s.dropout = s.attention_dropout = s.ffn_dropout = s.word_dropout = p; }, info.allowed.min,
          info.allowed.max);
      for (const char* rate : {"dropout", "attention_dropout", "ffn_dropout", "word_dropout"}) flags_of_key[rate].push_back(all);
      return;
    }
    CLI::Option* flag = setting_flag(args, info, value, key == "attention" ? "attn,--attention" : "");
    if (key == "src" || key == "tgt") flag->default_str("");  // a new run infers them from DATA (--dump-config shows it)
    flags_of_key[key].push_back(flag);
  });
  return flags_of_key;
}

// --dump-config's text: the settings, each with where its value came from: the last of `base`
// (the preset, or the resumed run), --config, a flag (or DATA's files, for the languages).
std::string dumped_config(const RunSettings& s, const std::string& base, const Json& config_file, const std::string& config,
                          const FlagsOfKey& flags_of_key, bool resume, bool src_given, bool tgt_given) {
  std::map<std::string, std::string> origin;
  const Json resolved = to_json(s);
  for (const auto& item : resolved.items()) {
    const std::string& key = item.key();
    origin[key] = base;
    if (config_file.contains(key)) origin[key] = cat("--config ", config);
    for (const CLI::Option* flag : flags_of_key.at(key)) {
      if (flag->count() > 0) origin[key] = flag->get_name();
    }
  }
  if (!resume && !s.data.empty()) {
    if (!src_given) origin["src"] = cat("inferred from ", s.data, "/train.*");
    if (!tgt_given) origin["tgt"] = cat("inferred from ", s.data, "/train.*");
  } else if (!resume) {
    if (!src_given) origin["src"] = "the default; a run infers it from --data";
    if (!tgt_given) origin["tgt"] = "the default; a run infers it from --data";
  }
  return to_config_text(s, origin);
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
  args.option("run", "run directory (created; required unless --dump-config)", &o.run_dir);
  const FlagsOfKey flags_of_key = add_setting_flags(args, s);
  args.option("threads", "CPU threads (default: all)", &o.threads, 1, 4096);
  args.flag("resume", "continue the run in --run from its last checkpoint", &o.resume);
  Args::hidden(args.option("inject-nan-at-step", "testing: pretend the loss of this step is NaN", &o.inject_nan_at_step, 0,
                           int64_t{1} << 40));  // for the tests of the NaN guard
  Args::hidden(args.option("inject-rank-death-at-step", "testing: the last rank of a data-parallel job kills itself at this step",
                           &o.inject_rank_death_at_step, 0, int64_t{1} << 40));  // for the tests of a rank's death
  args.choice("on-nan", "a non-finite loss or gradient: stop (after saving the last good state) or skip the batch", &o.on_nan, {"stop", "skip"});
  args.footer(presets_table());
  if (!args.parse(argc, argv, 2)) return 0;
  const bool src_given = flags_of_key.at("src").front()->count() > 0 || config_file.contains("src");
  const bool tgt_given = flags_of_key.at("tgt").front()->count() > 0 || config_file.contains("tgt");
  // A new run's languages, where not given, come from DATA: before --dump-config too, which
  // prints what the run would use.
  if (!o.resume && !s.data.empty()) infer_languages(s, src_given, tgt_given);
  if (dump_config) {
    const std::string base = o.resume ? cat(RunDir{o.run_dir}.options(), " (--resume)")
                                      : cat("preset ", Args::value_of(argc, argv, 2, "preset",
                                                                      config_file.value("preset", std::string("small"))));
    std::fputs(dumped_config(s, base, config_file, config, flags_of_key, o.resume, src_given, tgt_given).c_str(), stdout);
    return 0;
  }
  if (o.run_dir.empty()) throw UsageError("qkgrad-translate train: --run is required (see --help)");
  if (s.data.empty()) {
    throw UsageError("qkgrad-translate train: --data is required for a new run (or data = \"DIR\" in --config; see --help)");
  }
  return g_comm != nullptr ? train(o, *g_comm) : train(o);
}

}  // namespace qkgrad::translate_cli
