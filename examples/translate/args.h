// The command line of qkgrad-translate's subcommands, on CLI11 (Debian libcli11-dev): typed
// options with ranges and choices, required options, generated --help. This file only declares
// options and words the errors; CLI11 parses.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "translation/usage.h"

namespace qkgrad::translation {

class Args {
 public:
  Args(std::string program, std::string summary);

  void flag(const std::string& name, const std::string& help, bool* target);
  void option(const std::string& name, const std::string& help, std::string* target, bool required = false);
  void option(const std::string& name, const std::string& help, int64_t* target, int64_t min, int64_t max);
  void option(const std::string& name, const std::string& help, double* target, double min, double max);
  // A number that sets more than one field: `set` is called with the value given; `shown` is
  // the default --help shows.
  void option(const std::string& name, const std::string& help, double shown, std::function<void(double)> set,
              double min, double max);
  void choice(const std::string& name, const std::string& help, std::string* target,
              const std::vector<std::string>& choices);

  // The value of --NAME in argv[first..] (the last one if given twice), or `fallback`: a lenient
  // first pass (other options, --help and errors are left to parse()), for an option whose
  // value decides the defaults of the others (train's --preset).
  static std::string value_of(int argc, char** argv, int first, const std::string& name, const std::string& fallback);

  // Parses argv[first..]; returns false after printing the help for --help. Throws UsageError
  // ("PROGRAM: --beam: must be between 1 and 64, got 0 (see --help)"). An option whose value is
  // missing never takes the next option as its value: "--run --resume" is an error (a value that
  // starts with -- is written --run=--x).
  bool parse(int argc, char** argv, int first);
  std::string help() const;

 private:
  std::string program_;
  CLI::App app_;
};

// The choices of every --device option, and its help text.
inline const std::vector<std::string> kDeviceChoices = {"cpu", "cuda"};
inline constexpr const char* kDeviceHelp = "where the model runs (cuda: needs a CUDA build and a GPU)";

}  // namespace qkgrad::translation
