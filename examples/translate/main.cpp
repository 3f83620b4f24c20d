// qkgrad-translate: the translation program. Subcommands:
//   prepare-bible  build the embedded Spanish→English Bible corpus from Debian packages
//   train          train a Transformer (QKNorm or scaled dot-product) with subwords and BLEU
//   translate      translate sentences with beam search
//   eval           translate a split and score it (BLEU, chrF)
//   score          the model's log-probability of given translations (rescoring)
//   average        average the parameters of several checkpoints into a new one
//   bleu           score a hypothesis file against a reference (sacreBLEU-compatible)
//   grads          dump one batch's loss and gradients for cross-checking other frameworks
//   attention      draw every layer's and head's attention for one sentence (SVG)
//   attention-stats  attention entropy / max probability / saturation per module on a split
// Every subcommand has --help. The ones that run the model take --device cpu|cuda (default cpu).
// Exit status: 0 success, 1 error, 2 usage error (also --device cuda where CUDA cannot run),
// 128 + the signal when train stops on SIGINT (130), SIGHUP (129) or SIGTERM (143).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <iterator>
#include <string>
#include <tuple>
#include <type_traits>

#include "cli/args.h"
#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "corpora/bible.h"
#include "distributed/communicator.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "plots/svg.h"
#include "training/data_parallel.h"
#include "training/run_dir.h"
#include "training/stop_signals.h"
#include "translation/attention_stats.h"
#include "translation/batching.h"
#include "translation/beam_search.h"
#include "translation/bleu.h"
#include "translation/score_report.h"
#include "translation/corpus.h"
#include "translation/grad_dump.h"
#include "translation/line_translator.h"
#include "translation/scoring.h"
#include "translation/averaging.h"
#include "translation/trained_model.h"
#include "translation/trainer.h"
#include "translation/usage.h"

using namespace qkgrad;
using namespace qkgrad::training;
using namespace qkgrad::translation;
using namespace qkgrad::corpora;

namespace {

// DATA/SPLIT.SRC and DATA/SPLIT.TGT of a trained run: the languages from its options.json, and
// DATA from there too unless `data` is given.
struct SplitFiles {
  std::string src, tgt;
  std::string bleu_tokenize;  // the run's (options.json)
};
SplitFiles split_files_of_run(const std::string& run, std::string data, const std::string& split) {
  const RunDir rd{run};
  check_is_run_directory(run);
  const RunSettings options = load_run_settings(rd.options());
  if (data.empty()) {
    data = options.data_dir;
    if (!data.empty() && data.front() != '/') {  // runs of older versions stored the path as given
      std::fprintf(stderr,
                   "note: %s gives the data directory as the relative path '%s' (a run of an older qkgrad), read "
                   "from the current directory; pass --data to choose it\n",
                   rd.options().c_str(), data.c_str());
    }
  }
  SplitFiles files{corpus_path(data, split, options.src), corpus_path(data, split, options.tgt), options.bleu_tokenize};
  if (!std::filesystem::exists(files.src) || !std::filesystem::exists(files.tgt)) {
    // Every NAME with both NAME.SRC and NAME.TGT in DATA, each plain or gzipped (.gz).
    std::vector<std::string> splits;
    const std::string src_suffix = "." + options.src;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(data, ec)) {
      std::string name = entry.path().filename().string();
      if (name.size() > 3 && name.compare(name.size() - 3, 3, ".gz") == 0) name.resize(name.size() - 3);
      if (name.size() <= src_suffix.size() || name.compare(name.size() - src_suffix.size(), src_suffix.size(), src_suffix) != 0) {
        continue;
      }
      const std::string stem = name.substr(0, name.size() - src_suffix.size());
      if (std::filesystem::exists(corpus_path(data, stem, options.tgt), ec) &&
          std::find(splits.begin(), splits.end(), stem) == splits.end()) {
        splits.push_back(stem);
      }
    }
    std::sort(splits.begin(), splits.end());
    fail(cat("--split ", split, ": ", std::filesystem::exists(files.src) ? files.tgt : files.src,
             " does not exist (nor gzipped, .gz); ", data,
             splits.empty() ? cat(" has no NAME.", options.src, " with NAME.", options.tgt, " (plain or .gz)")
                            : cat(" has the splits ", join(splits, ", "))));
  }
  return files;
}

// The lines of --input, or of stdin: the same checks (UTF-8, no NUL bytes) and line endings.
std::vector<std::string> read_input_lines(const std::string& input) {
  if (!input.empty()) return read_text_lines(input);
  const std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
  QKGRAD_CHECK(!std::cin.bad(), "<stdin>: reading failed");
  return split_text_lines(text, "<stdin>");
}

constexpr const char* kCheckpointHelp =
    "which checkpoint: best (the default; last if there is none yet), last, or a checkpoint directory";
// Why --checkpoint is given once: the last would win. translate and eval take an ensemble as one list.
constexpr const char* kOneCheckpoint =
    "this command uses one model (an ensemble, --checkpoint A,B, is for translate and eval); to combine checkpoints "
    "into one model, `average` them";
constexpr const char* kEnsembleHelp =
    "which checkpoint: best (the default; last if there is none yet), last, or a checkpoint directory; several, "
    "A,B,..., decode as an ensemble (the mean of their log-probabilities; the same subwords, any sizes)";
constexpr const char* kOneList = "an ensemble is one list: --checkpoint A,B";

// Where a write to stdout failed (a full disk under a redirect, a closed pipe): an Error,
// "translate: writing the translations to stdout failed: ...".
void check_stdout(const std::string& writing) {
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int err = errno;
  fail(cat(writing, " to stdout failed: ", err ? std::strerror(err) : "I/O error",
           "; free some disk space, or write them with --output"));
}

// The scoring flags `bleu` and `eval` share, sacreBLEU's: which metrics, case, sentence level,
// the output form.
struct ScoreFlags {
  std::string metrics = "bleu,chrf", format = "text";
  bool lowercase = false, sentence_level = false, score_only = false;
  int64_t width = 2;
  CLI::Option* metrics_given = nullptr;

  explicit ScoreFlags(Args& args) {
    metrics_given = args.custom("metrics", "bleu, chrf or bleu,chrf (default: both; bleu alone with --sentence-level)",
                                "LIST", [this](const std::string& v) {
                                  if (v != "bleu" && v != "chrf" && v != "bleu,chrf" && v != "chrf,bleu") {
                                    return std::string("must be bleu, chrf or bleu,chrf, got '") + v + "'";
                                  }
                                  metrics = v;
                                  return std::string();
                                });
    args.flag("lowercase", "case-insensitive scores (both metrics; the signatures say case:lc)", &lowercase);
    args.flag("sentence-level", "one score per line (BLEU with the effective order, eff:yes); one metric", &sentence_level);
    args.choice("format", "text (sacreBLEU's text form) or json (sacreBLEU's JSON; JSON Lines per sentence)", &format,
                {"text", "json"});
    args.flag("score-only", "the bare number(s), one per line (sacreBLEU's -b)", &score_only);
    args.option("width", "decimals of the scores", &width, 0, 10);
  }
  ReportOptions report(BleuTokenize tokenize) const {
    ReportOptions o;
    o.scoring = {tokenize, lowercase};
    const bool chosen = metrics_given->count() > 0;  // else sentence level is BLEU's, as in sacreBLEU
    o.bleu = metrics.find("bleu") != std::string::npos;
    o.chrf = metrics.find("chrf") != std::string::npos && (chosen || !sentence_level);
    o.sentence_level = sentence_level;
    o.format = score_only ? ScoreFormat::score_only : parse_score_format(format);
    o.width = static_cast<int>(width);
    return o;
  }
};

// The scores in the form ScoreFlags chose (translation/score_report.h), and sacreBLEU's warning
// (on stderr) when 13a scores text that looks tokenised. Every reference file must have as many
// lines as the hypotheses (an Error names both files).
void print_scores(const std::vector<std::string>& hyps, const ReferenceStreams& refs, const std::string& hyp_name,
                  const std::vector<std::string>& ref_names, const ReportOptions& options, bool warn = true) {
  for (std::size_t r = 0; r < refs.size(); ++r) {
    QKGRAD_CHECK(hyps.size() == refs[r].size(), hyp_name, " has ", hyps.size(), " lines but ", ref_names[r], " has ",
                 refs[r].size(), "; they must be aligned line by line");
  }
  const std::string report = score_report(hyps, refs, options);
  const std::string warning = tokenized_text_warning(hyps, options.scoring.tokenize);
  if (warn && !warning.empty()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
  std::fputs(report.c_str(), stdout);
}

int cmd_prepare_bible(int argc, char** argv) {
  BibleOptions o;
  Args args("qkgrad-translate prepare-bible",
            "Builds train/dev/test.{es,en} from the Reina-Valera 1909 (Spanish) and World English Bible\n"
            "SWORD modules (apt-get install diatheke sword-text-sparv sword-text-web).");
  args.option("out", "output directory", &o.out_dir, true);
  args.option("diatheke", "the diatheke program", &o.diatheke);
  if (!args.parse(argc, argv, 2)) return 0;
  const BibleStats stats = prepare_bible(o);
  std::printf("%s\n", stats.summary().c_str());
  return 0;
}

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

// "QKNorm", "scaled dot-product", "RMS QK-norm", "LayerNorm QK-norm": for titles.
const char* mode_title(AttentionMode mode) {
  switch (mode) {
    case AttentionMode::qknorm: return "QKNorm";
    case AttentionMode::scaled_dot: return "scaled dot-product";
    case AttentionMode::rms_qknorm: return "RMS QK-norm";
    case AttentionMode::layer_qknorm: return "LayerNorm QK-norm";
  }
  return "?";
}

// The job's communicator, made by main() for `train`: MPI under mpirun, else one process.
distributed::Communicator* g_comm = nullptr;

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

// --threads of the commands that run a model (as train's): CPU threads, default all. On a shared
// machine fewer threads than cores can be much faster: OpenMP's threads wait for each other when
// other work holds some of the cores.
struct ThreadsFlag {
  int64_t threads = 0;
  explicit ThreadsFlag(Args& args) {
    args.option("threads", "CPU threads (default: all)", &threads, 1, 4096)->default_str("all");
  }
  void apply() const {
    if (threads > 0) set_num_threads(static_cast<int>(threads));
  }
};

// The beam search's flags, shared by translate and eval (BeamOptions, translation/beam_search.h).
struct SearchFlags {
  BeamOptions& beam;
  std::string stop = "first-k";
  CLI::Option* beam_given;
  SearchFlags(Args& args, BeamOptions& options) : beam(options) {
    beam_given = args.option("beam", "beam size", &beam.beam, 1, 64);
    args.option("alpha", "GNMT length penalty exponent: score = (log P - word penalty x length) / ((5 + length) / 6)^alpha",
                &beam.alpha, 0, 10);
    args.choice("beam-stop", "when a sentence's beam search stops: first-k (fairseq's rule: once beam-size hypotheses "
                "have ended) or bound (when no live hypothesis can still beat the beam-size-th best ending under the "
                "length and word penalties)", &stop, {"first-k", "bound"});
    args.option("max-extra", "at most source length + this many tokens", &beam.max_extra, 1, 10000);
    args.option("min-length", "no end of sentence before this many subwords (fairseq's --min-len; the --max-extra limit "
                "still ends a hypothesis)", &beam.min_length, 0, 10000);
    args.option("word-penalty", "subtracted from log P per subword, end of sentence included, before the length penalty "
                "divides (Marian's --word-penalty): negative lengthens the output, positive shortens it; tune it on dev",
                &beam.word_penalty, -100, 100);
  }
  void apply() const { beam.stop = stop == "bound" ? BeamStop::bound : BeamStop::first_k; }
};

int cmd_translate(int argc, char** argv) {
  std::string run, input, output, device = "cpu", checkpoint;
  BeamOptions beam;
  bool greedy = false, quiet = false;
  int64_t max_length = 1024, n_best = 0, batch_lines = 0;
  Args args("qkgrad-translate translate",
            "Translates one sentence per line from --input (or stdin) with batched beam search and writes the\n"
            "detokenised translations to --output (or stdout), one line per input line, in order. Lines are\n"
            "read and translated --batch-lines at a time, and on stdout each batch is written as soon as it\n"
            "is done (a pipe or a terminal gets its answers while the input goes on).");
  args.option("run", "run directory", &run, true);
  args.once(args.option("input", "input file (default: stdin)", &input), "translate one file at a time");
  args.option("output", "output file, written atomically at the end (default: stdout, as it goes)", &output);
  args.once(args.option("checkpoint", kEnsembleHelp, &checkpoint), kOneList);
  SearchFlags search(args, beam);
  CLI::Option* beam_given = search.beam_given;
  args.option("max-length", "longer lines are cropped to this many subwords (counted on stderr)", &max_length, 1, 100000);
  args.option("n-best", "write the K best of each line as `N ||| translation ||| F0= logP ||| score` (Moses/Marian: N "
              "counts lines from 0; F0 = log P(translation + eos), score = (log P - word penalty x length) / length penalty, the beam's ranking); "
              "K <= --beam", &n_best, 1, 64);
  args.option("batch-lines", "lines read and translated at a time, or fewer when the input pauses (default: 1 from a "
              "terminal, else 500)", &batch_lines, 1, 1000000);
  args.flag("greedy", "greedy decoding (beam 1)", &greedy);
  args.flag("sample", "sample instead of searching (back-translation): one sample per line, or --n-best K samples, "
            "best first", &beam.sampling.on);
  CLI::Option* sampling_flags[] = {
      args.option("temperature", "with --sample: draw from softmax(log p / T); below 1 sharper, above 1 flatter",
                  &beam.sampling.temperature, [](double t) { return t > 0 && t <= 1000; }, "between 0 (excluded) and 1000"),
      args.option("top-k", "with --sample: draw among the K most likely tokens only (0: all)", &beam.sampling.top_k, 0,
                  1000000),
      args.option("seed", "with --sample: the samples' seed (a line's samples depend only on it, the line's number and "
                  "the model)", &beam.sampling.seed, 0, std::numeric_limits<int64_t>::max())};
  args.flag("quiet", "nothing on stderr but errors (no note about cropped lines)", &quiet);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  search.apply();
  const Device on = parse_device("qkgrad-translate translate", device);
  for (CLI::Option* o : sampling_flags) {
    if (o->count() > 0 && !beam.sampling.on) throw UsageError(cat("qkgrad-translate translate: ", o->get_name(), " needs --sample"));
  }
  if (beam.sampling.on) {
    if (greedy || beam_given->count() > 0) {
      throw UsageError("qkgrad-translate translate: --sample draws instead of searching: leave out --beam and --greedy "
                       "(--n-best K gives K samples per line)");
    }
    if (beam.min_length > 0) {
      throw UsageError("qkgrad-translate translate: --min-length shapes the beam search; --sample draws from the model as "
                       "it is: leave out one of them");
    }
    beam.beam = std::max<int64_t>(n_best, 1);
  }
  if (greedy) beam.beam = 1;
  if (n_best > beam.beam) {
    throw UsageError(cat("qkgrad-translate translate: --n-best ", n_best, " needs --beam ", n_best, " or more (--beam is ",
                         beam.beam, ")"));
  }
  if (batch_lines == 0) batch_lines = input.empty() && ::isatty(STDIN_FILENO) ? 1 : 500;
  if (!output.empty()) check_can_write(output, "translate: --output " + output);  // before the work, not after
  LoadedModel m = load_ensemble(run, on, checkpoint);
  LineTranslator translator(m, beam, max_length);
  LineReader reader(input);
  // Reads, translates and writes batch after batch; `flush` pushes each batch out (stdout).
  auto translate_to = [&](std::FILE* out, bool flush) {
    int64_t line_no = 0;
    for (bool more = true; more;) {
      std::vector<std::string> lines;
      std::string line;
      // A batch is --batch-lines lines, or fewer when the input pauses (a pipe whose writer waits
      // for the answers): what has arrived is translated at once.
      while (static_cast<int64_t>(lines.size()) < batch_lines && (lines.empty() || reader.ready()) &&
             (more = reader.next(line))) {
        lines.push_back(line);
      }
      const auto hypotheses = translator.translate(lines, reader.name(), line_no + 1);
      for (const auto& h : hypotheses) {
        if (n_best == 0) {
          std::fprintf(out, "%s\n", translator.text(h.front()).c_str());
        } else {
          for (std::size_t k = 0; k < h.size() && static_cast<int64_t>(k) < n_best; ++k) {
            // Moses/Marian: the model's feature (F0= log P) and the total the beam ranked by.
            std::fprintf(out, "%ld ||| %s ||| F0= %.6f ||| %.6f\n", static_cast<long>(line_no),
                         translator.text(h[k]).c_str(), h[k].log_prob, h[k].score);
          }
        }
        ++line_no;
      }
      if (flush) check_stdout("translate: writing the translations");
    }
  };
  if (output.empty()) {
    translate_to(stdout, true);
  } else {
    write_file_atomically(output, [&](std::FILE* f) { translate_to(f, false); });
  }
  if (!quiet) translator.report_crops();
  return 0;
}

// `score`: the model's log-probability of given translations, one line per pair.
int cmd_score(int argc, char** argv) {
  std::string run, src, tgt, output, device = "cpu", checkpoint;
  bool normalize = false;
  int64_t max_length = 1024;
  Args args("qkgrad-translate score",
            "Scores given translations with the model (for rescoring, as Marian's scorer or fairseq's\n"
            "--score-reference): for each line pair of --src and --tgt, log P(tgt | src) = the sum of the\n"
            "natural-log probabilities of the target's subwords and its end-of-sentence token, teacher-forced,\n"
            "dropout off. One number per line, in order.");
  args.option("run", "run directory", &run, true);
  args.option("src", "source sentences", &src, true);
  args.option("tgt", "their translations, line by line", &tgt, true);
  args.option("output", "output file (default: stdout)", &output);
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.flag("normalize", "divide each score by its token count (the target's subwords + 1)", &normalize);
  args.option("max-length", "the longest line scored, in subwords (a longer one is an error naming it)", &max_length, 1, 100000);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate score", device);
  if (!output.empty()) check_can_write(output, "score: --output " + output);
  const std::vector<std::string> sources = read_text_lines(src), targets = read_text_lines(tgt);
  QKGRAD_CHECK(sources.size() == targets.size(), "score: ", src, " has ", sources.size(), " lines but ", tgt, " has ",
               targets.size(), "; they must be aligned line by line");
  LoadedModel m = load_trained_model(run, on, checkpoint);
  std::vector<Pair> pairs;
  for (std::size_t i = 0; i < sources.size(); ++i) {
    Pair p{m.subwords->encode(normalize_spaces(sources[i])), m.subwords->encode(normalize_spaces(targets[i]))};
    for (const auto& [side, path] : {std::pair{&p.src, &src}, std::pair{&p.tgt, &tgt}}) {
      QKGRAD_CHECK(static_cast<int64_t>(side->size()) <= max_length, "score: ", *path, ":", i + 1, ": the line is ",
                   side->size(), " subwords long, more than --max-length ", max_length,
                   " (a cropped line would get another sentence's score); raise --max-length or split it");
    }
    pairs.push_back(std::move(p));
  }
  std::string text;
  for (const PairScore& s : score_pairs(*m.model, pairs)) {
    char number[32];
    std::snprintf(number, sizeof number, "%.6f\n", normalize ? s.log_prob / static_cast<double>(s.tokens) : s.log_prob);
    text += number;
  }
  if (output.empty()) {
    std::fputs(text.c_str(), stdout);
    check_stdout("score: writing the scores");
  } else {
    write_file_atomically(output, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  }
  return 0;
}

// `average`: a checkpoint whose parameters are the mean of several.
int cmd_average(int argc, char** argv) {
  std::string run, list, out;
  int64_t last = 0;
  Args args("qkgrad-translate average",
            "Averages the parameters of several checkpoints into a new model-only checkpoint (as fairseq's\n"
            "average_checkpoints.py and onmt_average_models): the K newest that train --keep-last K kept in\n"
            "RUNDIR/checkpoints/step-N (--run R --last K), or the directories given (--checkpoints A,B,C).\n"
            "Translate with it: translate --run R --checkpoint OUT.");
  args.option("run", "run directory (with --last)", &run);
  args.option("last", "average the K newest checkpoints/step-N of --run", &last, 1, 1000000);
  args.option("checkpoints", "comma-separated checkpoint directories", &list);
  args.option("out", "the new checkpoint directory", &out, true);
  if (!args.parse(argc, argv, 2)) return 0;
  std::vector<std::string> inputs;
  if (last > 0) {
    if (run.empty() || !list.empty()) throw UsageError("qkgrad-translate average: --last needs --run (and no --checkpoints)");
    const std::string dir = RunDir{run}.checkpoints();
    inputs = kept_step_checkpoints(dir);
    QKGRAD_CHECK(static_cast<int64_t>(inputs.size()) >= last, "average: ", dir, " has ", inputs.size(),
                 " step-N checkpoints, fewer than --last ", last, " (train with --keep-last K to keep them)");
    inputs.erase(inputs.begin(), inputs.end() - last);
  } else {
    if (list.empty()) throw UsageError("qkgrad-translate average: give --checkpoints A,B,... or --run R --last K");
    for (std::size_t start = 0; start <= list.size();) {
      const std::size_t end = std::min(list.find(',', start), list.size());
      if (end > start) inputs.push_back(list.substr(start, end - start));
      start = end + 1;
    }
  }
  average_checkpoints(inputs, out);
  std::printf("averaged %zu checkpoints (%s) into %s\n", inputs.size(), join(inputs, ", ").c_str(), out.c_str());
  return 0;
}

int cmd_bleu(int argc, char** argv) {
  std::vector<std::string> ref_files;
  std::string hyp, tokenize = "13a";
  Args args("qkgrad-translate bleu", "BLEU and chrF of --hyp (or stdin) against one or more --ref files, computed and printed\n"
                                     "as sacreBLEU 2.x does (its signatures, its text and JSON forms).");
  args.list("ref", "a reference file; give --ref again for several references per line (multi-reference)", &ref_files,
            true);
  args.option("hyp", "hypothesis file (default: stdin)", &hyp);
  args.choice("tokenize", "13a (sacreBLEU's default) or none (pre-tokenised text)", &tokenize, {"13a", "none"});
  ScoreFlags flags(args);
  if (!args.parse(argc, argv, 2)) return 0;
  ReferenceStreams refs;
  for (const std::string& f : ref_files) refs.push_back(read_text_lines(f));
  const std::vector<std::string> hyps = read_input_lines(hyp);
  print_scores(hyps, refs, hyp.empty() ? "bleu: the hypothesis (stdin)" : "bleu: " + hyp, ref_files,
               flags.report(parse_bleu_tokenize(tokenize)));
  return 0;
}

int cmd_eval(int argc, char** argv) {
  std::string run, split = "test", data, tokenize, device = "cpu", checkpoint;
  BeamOptions beam;
  int64_t show = 0, max_length = 1024;
  Args args("qkgrad-translate eval", "Translates DATA/SPLIT.SRC and scores it against DATA/SPLIT.TGT (BLEU, chrF, with\n"
                                     "sacreBLEU-style signatures); writes the translations to RUNDIR/SPLIT.hyp, one line per\n"
                                     "source line (an empty source gives an empty line), so that `bleu --ref DATA/SPLIT.TGT\n"
                                     "--hyp RUNDIR/SPLIT.hyp` gives the same scores.");
  args.option("run", "run directory", &run, true);
  args.option("split", "which split: train, dev or test (DATA/SPLIT.SRC and DATA/SPLIT.TGT)", &split);
  args.option("data", "data directory (default: the one the run was trained on)", &data);
  args.once(args.option("checkpoint", kEnsembleHelp, &checkpoint), kOneList);
  SearchFlags search(args, beam);
  args.choice("tokenize", "BLEU tokenisation (default: the run's, bleu_tokenize in options.json)", &tokenize, {"13a", "none"});
  args.option("show", "print this many source / reference / translation triples", &show, 0, 1000000);
  args.option("max-length", "longer source lines are cropped to this many subwords (counted on stderr)", &max_length, 1, 100000);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  ScoreFlags flags(args);
  bool quiet = false;
  args.flag("quiet", "on stderr only errors (no note about cropped lines, no warning)", &quiet);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  search.apply();
  const Device on = parse_device("qkgrad-translate eval", device);
  const SplitFiles files = split_files_of_run(run, data, split);
  const std::string hyp_path = run + "/" + split + ".hyp";
  check_can_write(hyp_path, "eval: the translations " + hyp_path);  // before the work, not after
  const std::vector<std::string> sources = read_text_lines(files.src), refs = read_text_lines(files.tgt);
  QKGRAD_CHECK(sources.size() == refs.size(), "eval: ", files.src, " has ", sources.size(), " lines but ", files.tgt,
               " has ", refs.size(), "; they must be aligned line by line");
  LoadedModel m = load_ensemble(run, on, checkpoint);
  LineTranslator translator(m, beam, max_length);
  const std::vector<std::string> hyps = translator.translate_best(sources, files.src, 1);
  if (!quiet) translator.report_crops();
  std::string text;
  for (const auto& h : hyps) text += h + "\n";
  write_file_atomically(hyp_path, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
  const ReportOptions report = flags.report(parse_bleu_tokenize(tokenize.empty() ? files.bleu_tokenize : tokenize));
  // Only the scores on stdout when a script reads them (--format json, --score-only, --sentence-level).
  std::FILE* notes = report.format == ScoreFormat::text && !report.sentence_level ? stdout : stderr;
  if (!(quiet && notes == stderr)) {
    std::fprintf(notes, "%s %s (%zu sentences, beam %ld)\n", split.c_str(), m.checkpoint.c_str(), hyps.size(),
                 static_cast<long>(beam.beam));
    std::fflush(notes);
  }
  print_scores(hyps, {refs}, "eval: " + hyp_path, {files.tgt}, report, !quiet);
  std::fflush(stdout);
  for (int64_t i = 0; i < show && i < static_cast<int64_t>(hyps.size()); ++i) {
    const std::size_t k = static_cast<std::size_t>(i * static_cast<int64_t>(hyps.size()) / std::max<int64_t>(show, 1));
    std::fprintf(notes, "\n  source:      %s\n  reference:   %s\n  translation: %s\n", sources[k].c_str(), refs[k].c_str(),
                 hyps[k].c_str());
  }
  return 0;
}

int cmd_grads(int argc, char** argv) {
  std::string run, src, tgt, out, device = "cpu", checkpoint;
  int64_t max_sentences = 8;
  double smoothing = 0.1;
  Args args("qkgrad-translate grads", "Runs one batch (the first sentences of --src/--tgt) with dropout off and writes the\n"
                                      "token ids, the loss and every parameter's gradient to --out (safetensors).");
  args.option("run", "run directory", &run, true);
  args.option("src", "source sentences", &src, true);
  args.option("tgt", "target sentences", &tgt, true);
  args.option("out", "output .safetensors file", &out, true);
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.option("max-sentences", "sentences in the batch", &max_sentences, 1, 100000);
  args.option("label-smoothing", "label smoothing epsilon", &smoothing, 0, 1);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate grads", device);
  check_can_write(out, "grads: --out " + out);
  LoadedModel m = load_trained_model(run, on, checkpoint);
  const ParallelCorpus corpus = read_parallel(src, tgt, 1 << 20);
  std::vector<Pair> pairs;
  std::vector<int64_t> indices;
  for (std::size_t i = 0; i < corpus.src.size() && static_cast<int64_t>(i) < max_sentences; ++i) {
    pairs.push_back({m.subwords->encode(corpus.src[i]), m.subwords->encode(corpus.tgt[i])});
    indices.push_back(static_cast<int64_t>(i));
  }
  const Batch b = make_batch(pairs, indices, on, special_ids(m.model->config()));
  const double loss = write_gradient_dump(*m.model, b.src, b.src_lengths, b.tgt_in, b.tgt_out, b.tgt_lengths, smoothing, out);
  std::printf("wrote %s: %zu sentences, loss %.6f per target token, %zu parameter gradients\n", out.c_str(), pairs.size(),
              loss, m.model->named_parameters().size());
  return 0;
}

int cmd_attention(int argc, char** argv) {
  std::string run, text, out, device = "cpu", checkpoint;
  int64_t max_length = 128;
  Args args("qkgrad-translate attention",
            "Translates --text (greedy), then draws the attention probabilities of every layer and head:\n"
            "encoder self-attention, decoder self-attention and cross-attention, one SVG grid each.");
  args.option("run", "run directory", &run, true);
  args.once(args.option("text", "the source sentence", &text, true), "one sentence at a time");
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.option("out", "output prefix (default RUNDIR/attention): writes PREFIX-encoder.svg, -decoder.svg, -cross.svg", &out);
  args.option("max-length", "the longest --text drawn, in subwords (a heatmap has length^2 cells per head)", &max_length, 1,
              1024);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate attention", device);
  if (out.empty()) out = run + "/attention";
  if (const auto folder = std::filesystem::path(out).parent_path(); !folder.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(folder, ec);  // a failure: check_can_write names it
  }
  for (const char* part : {"-encoder.svg", "-decoder.svg", "-cross.svg"}) check_can_write(out + part, "attention: --out " + out);
  LoadedModel m = load_trained_model(run, on, checkpoint);
  Seq2SeqTransformer& model = *m.model;
  const std::vector<int64_t> src = m.subwords->encode(normalize_spaces(text));
  QKGRAD_CHECK(!src.empty(), "attention: --text is empty");
  QKGRAD_CHECK(static_cast<int64_t>(src.size()) <= max_length, "attention: --text is ", src.size(),
               " subwords long, more than --max-length ", max_length,
               "; the heatmaps draw one sentence: give a shorter one (or raise --max-length, up to 1024)");
  const std::vector<int64_t> hyp = translate_all(model, {src}, BeamOptions{1, 0.6, 50, {}})[0];
  // One teacher-forced pass over (source, its translation) records every attention map.
  for (auto& layer : model.encoder_layers) layer->self_attn.record_probs = true;
  for (auto& layer : model.decoder_layers) layer->self_attn.record_probs = layer->cross_attn.record_probs = true;
  Pair pair{src, hyp};
  const Batch b = make_batch({pair}, {0}, on, special_ids(model.config()));
  {
    NoGradGuard no_grad;
    model.forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);
  }
  auto labels = [&](const std::vector<int64_t>& ids, bool with_bos, bool with_eos) {
    std::vector<std::string> l;
    if (with_bos) l.push_back("<s>");
    for (int64_t id : ids) l.push_back(m.subwords->piece(id));
    if (with_eos) l.push_back("</s>");
    return l;
  };
  const auto src_labels = labels(src, false, true), tgt_labels = labels(hyp, true, false);
  auto maps_of = [&](const std::string& kind, const std::vector<const MultiHeadAttention*>& modules,
                     const std::vector<std::string>& rows, const std::vector<std::string>& cols) {
    std::vector<svg::Heatmap> maps;
    for (std::size_t l = 0; l < modules.size(); ++l) {
      const Tensor p = modules[l]->last_probs.to(Device::cpu);  // [1, H, Tq, Tk], read below
      for (int64_t h = 0; h < p.size(1); ++h) {
        svg::Heatmap map{cat(kind, " layer ", l, " head ", h), rows, cols, {}};
        for (int64_t i = 0; i < p.size(2); ++i) {
          std::vector<double> row;
          for (int64_t j = 0; j < p.size(3); ++j) row.push_back(p.at({0, h, i, j}));
          map.values.push_back(row);
        }
        maps.push_back(map);
      }
    }
    return maps;
  };
  std::vector<const MultiHeadAttention*> enc, dec, cross;
  for (auto& layer : model.encoder_layers) enc.push_back(&layer->self_attn);
  for (auto& layer : model.decoder_layers) {
    dec.push_back(&layer->self_attn);
    cross.push_back(&layer->cross_attn);
  }
  const int64_t heads = model.config().heads;
  const std::string mode = mode_title(model.config().attention);
  const int columns = static_cast<int>(heads);
  svg::write_svg(out + "-encoder.svg", svg::heatmap_grid(mode + " encoder self-attention", maps_of("encoder", enc, src_labels, src_labels),
                                                         columns, "rows and columns: source tokens"));
  svg::write_svg(out + "-decoder.svg", svg::heatmap_grid(mode + " decoder self-attention", maps_of("decoder", dec, tgt_labels, tgt_labels),
                                                         columns, "rows and columns: target tokens (causal)"));
  svg::write_svg(out + "-cross.svg", svg::heatmap_grid(mode + " cross-attention", maps_of("cross", cross, tgt_labels, src_labels),
                                                       columns, "rows = target (queries), columns = source (keys)"));
  std::printf("translation: %s\nwrote %s-encoder.svg, %s-decoder.svg, %s-cross.svg\n", m.subwords->decode(hyp).c_str(),
              out.c_str(), out.c_str(), out.c_str());
  return 0;
}


int cmd_attention_stats(int argc, char** argv) {
  std::string run, split = "test", data, out, device = "cpu", checkpoint;
  int64_t sentences = 0, batch_tokens = 2000, max_length = 1024;
  Args args("qkgrad-translate attention-stats",
            "How peaked is the attention? Runs the model teacher-forced on DATA/SPLIT (source, reference) and\n"
            "prints, per attention module, the mean entropy of the probability rows (nats and normalised\n"
            "by ln of the visible keys), the mean largest probability and the share of rows with one\n"
            "probability >= 0.9 (saturated), with the module's QKNorm gain g. Pairs longer than\n"
            "--max-length subwords on either side are skipped and counted.");
  args.option("run", "run directory", &run, true);
  args.option("split", "which split (train, dev or test)", &split);
  args.option("data", "data directory (default: the one the run was trained on)", &data);
  args.option("sentences", "use the first N pairs (0: all)", &sentences, 0, 100000000);
  args.option("batch-tokens", "padded tokens per batch", &batch_tokens, 16, 1000000);
  args.option("max-length", "skip pairs longer than this many subwords", &max_length, 1, 100000);
  args.option("out", "also write one JSON object per module to this file (JSON lines)", &out);
  args.once(args.option("checkpoint", kCheckpointHelp, &checkpoint), kOneCheckpoint);
  args.choice("device", kDeviceHelp, &device, kDeviceChoices);
  ThreadsFlag threads(args);
  if (!args.parse(argc, argv, 2)) return 0;
  threads.apply();
  const Device on = parse_device("qkgrad-translate attention-stats", device);
  if (!out.empty()) check_can_write(out, "attention-stats: --out " + out);
  const SplitFiles files = split_files_of_run(run, data, split);
  const ParallelCorpus corpus = read_parallel(files.src, files.tgt, 1 << 20);
  LoadedModel m = load_trained_model(run, on, checkpoint);
  std::vector<Pair> pairs;
  int64_t skipped = 0;
  for (std::size_t i = 0; i < corpus.src.size(); ++i) {
    if (sentences > 0 && static_cast<int64_t>(pairs.size()) >= sentences) break;
    Pair p{m.subwords->encode(corpus.src[i]), m.subwords->encode(corpus.tgt[i])};
    if (static_cast<int64_t>(std::max(p.src.size(), p.tgt.size())) > max_length) {
      ++skipped;
      continue;
    }
    pairs.push_back(std::move(p));
  }
  const auto stats = attention_statistics(*m.model, pairs, batch_tokens);
  std::printf("%s %s: %zu sentence pairs (teacher-forced)%s; %s attention\n", split.c_str(), m.checkpoint.c_str(),
              pairs.size(), skipped ? cat(", ", skipped, " too long skipped").c_str() : "",
              mode_title(m.model->config().attention));
  std::printf("%-30s %10s %9s %10s %9s %9s %8s\n", "module", "rows", "entropy", "normalised", "max prob", "saturated",
              "g");
  for (const auto& s : stats) {
    std::printf("%-30s %10ld %9.3f %10.3f %9.3f %8.1f%% %8.3f\n", s.module.c_str(), static_cast<long>(s.rows),
                s.mean_entropy, s.mean_norm_entropy, s.mean_max_prob, 100 * s.saturated_fraction, s.g);
  }
  if (!out.empty()) {
    const std::string text = attention_statistics_jsonl(stats);
    write_file_atomically(out, [&](std::FILE* f) { std::fputs(text.c_str(), f); });
    std::printf("wrote %s\n", out.c_str());
  }
  return 0;
}

// The subcommands, each with its own options (COMMAND --help).
struct Command {
  const char* name;
  const char* summary;
  int (*run)(int argc, char** argv);
};
constexpr Command kCommands[] = {
    {"prepare-bible", "build the Spanish->English Bible corpus from Debian's SWORD packages", cmd_prepare_bible},
    {"train", "train a translation Transformer (QKNorm or scaled dot-product attention)", cmd_train},
    {"translate", "translate sentences (stdin or --input) with beam search", cmd_translate},
    {"eval", "translate a data split and report BLEU and chrF", cmd_eval},
    {"score", "the model's log-probability of given translations (rescoring)", cmd_score},
    {"average", "average the parameters of several checkpoints into a new one", cmd_average},
    {"bleu", "corpus BLEU and chrF of a hypothesis file against a reference", cmd_bleu},
    {"grads", "write one batch's loss and every gradient (safetensors) for cross-checks", cmd_grads},
    {"attention", "draw the attention of every layer and head for one sentence (SVG)", cmd_attention},
    {"attention-stats", "attention entropy, max probability and saturation of every module on a split",
     cmd_attention_stats},
};

std::string usage() {
  std::string text = "usage: qkgrad-translate COMMAND [options]   (COMMAND --help for its options; --version)\ncommands:\n";
  for (const Command& c : kCommands) text += cat("  ", c.name, std::string(17 - std::string(c.name).size(), ' '), c.summary, "\n");
  return text +
         "train, translate, eval, score, grads, attention and attention-stats run the model on --device cpu|cuda\n"
         "(default cpu; a run trained on one device loads on the other).\n";
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: stop signals go to one waiting thread, never to a computing one.
  StopSignals::route_to_watcher();
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(usage().c_str(), argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  if (command == "--version") {
    std::printf("qkgrad-translate %s (qkgrad %s)\n", QKGRAD_VERSION, QKGRAD_VERSION);
    return 0;
  }
  const auto found = std::find_if(std::begin(kCommands), std::end(kCommands), [&](const Command& c) { return command == c.name; });
  if (found == std::end(kCommands)) {
    std::fprintf(stderr, "qkgrad-translate: unknown command '%s'\n%s", command.c_str(), usage().c_str());
    return 2;
  }
  // Over a file size limit (ulimit -f), a write fails with EFBIG and is reported like a full
  // disk, instead of the signal ending the program with a half-written file.
  std::signal(SIGXFSZ, SIG_IGN);
  // Under mpirun (several ranks), `train` trains data-parallel; the other commands are one process.
  std::unique_ptr<distributed::Communicator> comm;
  // A rank that fails alone ends the whole job (MPI_Abort), so that no other rank waits for it
  // forever; a failure every rank meets at the same point (JobWideError) ends each normally.
  auto exit_status = [&](int status) {
    std::fflush(stdout);
    std::fflush(stderr);
    if (comm && comm->size() > 1) comm->abort_job(status);
    return status;
  };
  try {
    if (command == "train") {
      comm = distributed::from_launcher();
      g_comm = comm.get();
    } else if (distributed::launched_ranks() > 1) {
      throw UsageError(cat("qkgrad-translate ", command, ": started by mpirun as one of ", distributed::launched_ranks(),
                           " ranks; only `train` runs data-parallel: run ", command, " without mpirun"));
    }
    return found->run(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return exit_status(2);
  } catch (const Interrupted& e) {
    std::fprintf(stderr, "qkgrad-translate %s: %s\n", command.c_str(), e.what());
    return exit_status(e.exit_status());
  } catch (const JobWideError& e) {
    if (!comm || comm->is_root()) std::fprintf(stderr, "qkgrad-translate %s: error: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const Error& e) {
    const std::string rank = comm && comm->size() > 1 ? cat(" (rank ", comm->rank(), " of ", comm->size(), ")") : "";
    std::fprintf(stderr, "qkgrad-translate %s%s: error: %s\n", command.c_str(), rank.c_str(), e.what());
    return exit_status(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qkgrad-translate %s: unexpected error: %s\n", command.c_str(), e.what());
    return exit_status(1);
  }
}
