// qkgrad-lm train: the settings from a resumed run, a preset, --config and the flags, then the
// training run (lm/trainer.h).
#include "commands.h"

namespace qkgrad::lm_cli {

namespace {

// What train's flags change, in this order: a resumed run's options.json, or else the preset
// (--preset, else the one --config names, else small); then --config's values.
LmSettings base_settings(int argc, char** argv, Json& config_file, std::string& base) {
  const std::string run = Args::value_of(argc, argv, 2, "run", "");
  const std::string config = Args::value_of(argc, argv, 2, "config", "");
  config_file = config.empty() ? Json::object() : read_config_file(config);
  LmSettings s;
  if (Args::has_flag(argc, argv, 2, "resume") && !run.empty()) {
    const training::RunDir rd{run};
    QKGRAD_CHECK(std::filesystem::exists(rd.options()), "train --resume: ", rd.options(), " does not exist, so ", run,
                 " is not a training run; drop --resume to start one");
    s = load_run_settings(rd.options());
    base = cat(rd.options(), " (--resume)");
  } else {
    const std::string named = config_file.contains("preset") ? config_file.at("preset").get<std::string>() : "small";
    const std::string preset = Args::value_of(argc, argv, 2, "preset", named);
    s = preset_settings(is_preset(preset) ? preset : "small");  // an unknown one: the full pass says so
    base = cat("preset ", s.preset);
  }
  return from_json(config_file, config, s);
}

}  // namespace

int cmd_train(int argc, char** argv) {
  TrainOptions o;
  Json config_file;
  std::string base, config;
  o.settings = base_settings(argc, argv, config_file, base);
  LmSettings& s = o.settings;
  bool dump_config = false;
  Args args("qkgrad-lm train",
            "Trains a decoder-only Transformer on the bytes of DATA/train.txt, evaluating the loss per byte,\n"
            "perplexity and bits per byte on DATA/valid.txt; keeps RUNDIR/checkpoints/{best,last}.\n"
            "Settings come from the preset, then --config, then the flags (--help shows the result as defaults).\n"
            "`train --run R --resume` continues R with its options.json; flags given with it change those\n"
            "settings that may change and are refused for the others. Ctrl-C, SIGTERM or SIGHUP saves a\n"
            "resumable checkpoint. One process per run directory: a second one is refused.");
  args.option("config", "settings file: TOML with the keys of options.json (see --dump-config), or a run's options.json",
              &config);
  args.flag("dump-config", "print the resolved settings in --config's form and exit", &dump_config);
  args.option("run", "run directory (created; required unless --dump-config)", &o.run_dir);
  std::map<std::string, CLI::Option*> flag_of_key;
  LmSettings::for_each(s, [&](const SettingInfo& info, auto& value) {
    flag_of_key[info.key] = setting_flag(args, info, value, std::string(info.key) == "attention" ? "attention,--attn" : "");
  });
  args.option("threads", "CPU threads (default: all)", &o.threads, 1, 4096);
  args.flag("resume", "continue the run in --run from its last checkpoint", &o.resume);
  Args::hidden(args.option("inject-nan-at-step", "testing: pretend the loss of this step is NaN", &o.inject_nan_at_step, 0,
                           int64_t{1} << 40));
  args.choice("on-nan", "a non-finite loss or gradient: stop (after saving the last good state) or skip the batch", &o.on_nan,
              {"stop", "skip"});
  args.footer(presets_table());
  if (!args.parse(argc, argv, 2)) return 0;
  if (dump_config) {
    std::map<std::string, std::string> origin;
    for (const auto& [key, flag] : flag_of_key) {
      origin[key] = flag->count() > 0 ? flag->get_name() : config_file.contains(key) ? cat("--config ", config) : base;
    }
    std::fputs(to_config_text(s, origin).c_str(), stdout);
    return 0;
  }
  if (o.run_dir.empty()) throw UsageError("qkgrad-lm train: --run is required (see --help)");
  if (s.data.empty()) {
    throw UsageError("qkgrad-lm train: --data is required for a new run (a directory with train.txt and valid.txt; "
                     "`qkgrad-lm prepare` makes the default one)");
  }
  return train(o, *g_comm);
}

}  // namespace qkgrad::lm_cli
