// A small command-line parser for the subcommands of qkgrad-translate: typed options with
// ranges, required options, --help, and clear errors for unknown flags or bad values.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace qkgrad::translate {

// A usage error: the program prints it with the subcommand's help and exits with status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

class Args {
 public:
  Args(std::string program, std::string summary);

  void flag(const std::string& name, const std::string& help, bool* target);
  void option(const std::string& name, const std::string& help, std::string* target, bool required = false);
  void option(const std::string& name, const std::string& help, int64_t* target, int64_t min, int64_t max);
  void option(const std::string& name, const std::string& help, double* target, double min, double max);
  void choice(const std::string& name, const std::string& help, std::string* target,
              const std::vector<std::string>& choices);

  // Parses argv[first..]; returns false after printing the help for --help. Throws UsageError.
  bool parse(int argc, char** argv, int first);
  std::string help() const;

 private:
  struct Option {
    std::string name, help, metavar;
    bool is_flag = false, required = false, seen = false;
    std::function<void(const std::string&)> set;
    std::string default_text;
  };
  std::string program_, summary_;
  std::vector<Option> options_;
};

// The choices of every --device option, and its help text.
inline const std::vector<std::string> kDeviceChoices = {"cpu", "cuda"};
inline constexpr const char* kDeviceHelp = "where the model runs (cuda: needs a CUDA build and a GPU)";

// The device named by a --device value (one of kDeviceChoices), checked before any work starts:
// cuda in a build without CUDA, or on a machine without a usable GPU, is a UsageError that
// starts with `program` and carries the backend's explanation.
Device parse_device(const std::string& program, const std::string& name);

}  // namespace qkgrad::translate
