// qkgrad-translate's subcommands: what they share (the flags several take, reading a run's
// data split, printing scores) and their entry points, one file each (prepare_bible.cpp,
// train.cpp, translate.cpp, eval.cpp, score.cpp, average.cpp, bleu.cpp, grads.cpp, attention.cpp).
#pragma once

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
#include "cli/setting_flags.h"
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
#include "training/device_flag.h"

namespace qkgrad::translate_cli {

using namespace qkgrad::training;
using namespace qkgrad::translation;
using namespace qkgrad::corpora;

// DATA/SPLIT.SRC and DATA/SPLIT.TGT of a trained run: the languages from its options.json, and
// DATA from there too unless `data` is given.
struct SplitFiles {
  std::string src, tgt;
  std::string bleu_tokenize;  // the run's (options.json)
};
SplitFiles split_files_of_run(const std::string& run, std::string data, const std::string& split);

// The lines of --input, or of stdin: the same checks (UTF-8, no NUL bytes) and line endings.
std::vector<std::string> read_input_lines(const std::string& input);

inline constexpr const char* kCheckpointHelp =
    "which checkpoint: best (the default; last if there is none yet), last, or a checkpoint directory";
// Why --checkpoint is given once: the last would win. translate and eval take an ensemble as one list.
inline constexpr const char* kOneCheckpoint =
    "this command uses one model (an ensemble, --checkpoint A,B, is for translate and eval); to combine checkpoints "
    "into one model, `average` them";
inline constexpr const char* kEnsembleHelp =
    "which checkpoint: best (the default; last if there is none yet), last, or a checkpoint directory; several, "
    "A,B,..., decode as an ensemble (the mean of their log-probabilities; the same subwords, any sizes)";
inline constexpr const char* kOneList = "an ensemble is one list: --checkpoint A,B";

// Where a write to stdout failed (a full disk under a redirect, a closed pipe): an Error,
// "translate: writing the translations to stdout failed: ...".
void check_stdout(const std::string& writing);

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
                  const std::vector<std::string>& ref_names, const ReportOptions& options, bool warn = true);

// "QKNorm", "scaled dot-product", "RMS QK-norm", "LayerNorm QK-norm": for titles.
const char* mode_title(AttentionMode mode);

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

// The job's communicator, made by main() for `train`: MPI under mpirun, else one process.
extern distributed::Communicator* g_comm;

// The subcommands (main.cpp has their table), each in its own file.
int cmd_prepare_bible(int argc, char** argv);
int cmd_train(int argc, char** argv);
int cmd_translate(int argc, char** argv);
int cmd_eval(int argc, char** argv);
int cmd_score(int argc, char** argv);
int cmd_average(int argc, char** argv);
int cmd_bleu(int argc, char** argv);
int cmd_grads(int argc, char** argv);
int cmd_attention(int argc, char** argv);
int cmd_attention_stats(int argc, char** argv);

}  // namespace qkgrad::translate_cli
