// The command line of every qkgrad program (qkgrad-translate's subcommands, qkgrad-mlp,
// qkgrad-gradcheck, the benchmarks in bench/), on CLI11 (Debian libcli11-dev): typed options with
// ranges and choices, flags, required options, generated --help. This file only declares options
// and words the errors; CLI11 parses.
//
//   qkgrad::Args args("qkgrad-mlp", "Trains a two-layer MLP ...", qkgrad::kProgramStyle);
//   args.option("steps", "full-batch SGD steps", &steps, 1, 100'000'000);
//   args.option("lr", "learning rate (> 0)", &lr, [](double x) { return x > 0; }, "> 0");
//   args.flag("json", "print one JSON line instead of the text", &json);
//   if (const auto status = args.parse_main(argc, argv)) return *status;  // --help, or an error
//
// Every program answers -h/--help and --version ("PROGRAM VERSION (qkgrad VERSION)"); an unknown
// --flag close to a known one gets "did you mean --known?".
// Every error is a UsageError (core/error.h) naming the option ("qkgrad-mlp: --steps: must be between 1
// and 100000000, got 0 (see --help)"); programs print it and exit with status 2. Integers are
// decimal only: "010" is ten (not octal eight), "0x10" is refused.
#pragma once

#include <CLI/CLI.hpp>

#include <concepts>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace qkgrad {

// How --help looks. The defaults are qkgrad-translate's; kProgramStyle is that of the
// single-command programs (qkgrad-mlp, qkgrad-gradcheck, the benchmarks).
struct HelpStyle {
  std::string help_flag = "-h,--help";  // "--help": without -h
  bool lowercase = true;             // "usage: ... [options]" and "options:" (false: CLI11's "Usage", "[OPTIONS]", "Options")
  bool ranges = false;               // an integer option's help ends with its range, " (1 to 64)"
};
inline const HelpStyle kProgramStyle{"-h,--help", false, true};

class Args {
 public:
  Args(std::string program, std::string summary, HelpStyle style = {});

  // Each adds --NAME and returns CLI11's option, for what only one program needs (a type name
  // other than the usual N, X or TEXT: ->type_name("K"); a default shown in words: ->default_str("all")).
  CLI::Option* flag(const std::string& name, const std::string& help, bool* target);
  CLI::Option* option(const std::string& name, const std::string& help, std::string* target, bool required = false);
  // An integer in [min, max] (decimal, written N), into any integral type that holds the range.
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  CLI::Option* option(const std::string& name, const std::string& help, T* target, int64_t min, int64_t max);
  // A number in [min, max] (written X).
  CLI::Option* option(const std::string& name, const std::string& help, double* target, double min, double max);
  // A number that satisfies `ok` (written X); otherwise "--NAME: must be WHAT, got VALUE".
  CLI::Option* option(const std::string& name, const std::string& help, double* target, std::function<bool(double)> ok,
                      const std::string& what);
  // A number that sets more than one field: `set` is called with the value given; `shown` is
  // the default --help shows.
  CLI::Option* option(const std::string& name, const std::string& help, double shown, std::function<void(double)> set,
                      double min, double max);
  // An option that may be given several times, each value appended to `target` in order.
  CLI::Option* list(const std::string& name, const std::string& help, std::vector<std::string>* target,
                    bool required = false);
  // One of `choices` (written a|b|c), its default shown unless it is "".
  CLI::Option* choice(const std::string& name, const std::string& help, std::string* target,
                      const std::vector<std::string>& choices);
  // One of `choices` that sets what `set` sets (e.g. an enum); `shown` is the default --help shows.
  CLI::Option* choice(const std::string& name, const std::string& help, const std::string& shown,
                      std::function<void(const std::string&)> set, const std::vector<std::string>& choices);
  // A value that `take` reads: it returns "" when it took the value, else what is wrong with it
  // ("--NAME: WHAT (see --help)"). No default is shown.
  CLI::Option* custom(const std::string& name, const std::string& help, const std::string& type_name,
                      std::function<std::string(const std::string&)> take);

  // The value of --NAME in argv[first..] (the last one if given twice), or `fallback`: a lenient
  // first pass (other options, --help and errors are left to parse()), for an option whose
  // value decides the defaults of the others (train's --preset).
  static std::string value_of(int argc, char** argv, int first, const std::string& name, const std::string& fallback);
  // Whether the flag --NAME is in argv[first..], in the same lenient way.
  static bool has_flag(int argc, char** argv, int first, const std::string& name);

  // Parses argv[first..]; returns false after printing the help for --help. Throws
  // UsageError ("PROGRAM: --beam: must be between 1 and 64, got 0 (see --help)"). An
  // option whose value is missing never takes the next option as its value: "--run --resume" is
  // an error (a value that starts with -- is written --run=--x). Given twice, an option takes
  // its last value, unless it is once().
  bool parse(int argc, char** argv, int first);
  // parse(argc, argv, 1) for a program's main(): the exit status main should return now (0
  // after --help; 2 after printing a usage error to stderr), or nullopt to go on.
  std::optional<int> parse_main(int argc, char** argv);
  std::string help() const;
  // Text printed after the options in --help (e.g. train's table of presets).
  void footer(const std::string& text);
  // An option that must not be given twice (parse() refuses it, naming the values and `why`):
  // one whose repetition a user may mean as several values (bleu --ref a --ref b as two
  // references, --checkpoint A --checkpoint B as an ensemble). Other options given twice take
  // their last value, so that a script's flags can be overridden by flags after them.
  CLI::Option* once(CLI::Option* o, const std::string& why);
  // An option for the tests alone: left out of --help, and named in its errors like any other
  // (CLI11's own hiding, an empty group, also drops the name from its errors).
  static CLI::Option* hidden(CLI::Option* o);

 private:
  CLI::Option* integer(CLI::Option* o, int64_t min, int64_t max);
  std::string suggestion() const;
  std::string with_range(const std::string& help, int64_t min, int64_t max) const;

  std::string program_;
  HelpStyle style_;
  CLI::App app_;
  std::vector<std::pair<CLI::Option*, std::string>> once_;
};

template <std::integral T>
  requires(!std::same_as<T, bool>)
CLI::Option* Args::option(const std::string& name, const std::string& help, T* target, int64_t min, int64_t max) {
  if (min > max || std::cmp_less(min, std::numeric_limits<T>::min()) || std::cmp_greater(max, std::numeric_limits<T>::max())) {
    throw std::invalid_argument(cat("Args: --", name, ": the range ", min, " to ", max, " does not fit its type"));
  }
  return integer(app_.add_option("--" + name, *target, with_range(help, min, max)), min, max);
}

// The choices of every --device option, and the help text of one that places a model.
inline const std::vector<std::string> kDeviceChoices = {"cpu", "cuda"};
inline constexpr const char* kDeviceHelp = "where the model runs (cuda: needs a CUDA build and a GPU)";

}  // namespace qkgrad
