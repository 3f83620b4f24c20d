#include "translate/args.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "backends/backend.h"

namespace qkgrad::translate {

Args::Args(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

void Args::flag(const std::string& name, const std::string& help, bool* target) {
  Option o{name, help, "", true, false, false, [target](const std::string&) { *target = true; }, ""};
  options_.push_back(o);
}

void Args::option(const std::string& name, const std::string& help, std::string* target, bool required) {
  options_.push_back({name, help, "TEXT", false, required, false, [target](const std::string& v) { *target = v; },
                      target->empty() ? "" : *target});
}

void Args::option(const std::string& name, const std::string& help, int64_t* target, int64_t min, int64_t max) {
  const std::string program = program_;
  options_.push_back({name, help, "N", false, false, false,
                      [=](const std::string& v) {
                        int64_t x = 0;
                        const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
                        if (r.ec == std::errc::result_out_of_range && r.ptr == v.data() + v.size()) {
                          throw UsageError(cat(program, ": --", name, " must be between ", min, " and ", max, ", got ", v));
                        }
                        if (r.ec != std::errc() || r.ptr != v.data() + v.size()) {
                          throw UsageError(cat(program, ": --", name, " needs an integer, got '", v, "'"));
                        }
                        if (x < min || x > max) {
                          throw UsageError(cat(program, ": --", name, " must be between ", min, " and ", max, ", got ", x));
                        }
                        *target = x;
                      },
                      std::to_string(*target)});
}

void Args::option(const std::string& name, const std::string& help, double* target, double min, double max) {
  const std::string program = program_;
  options_.push_back({name, help, "X", false, false, false,
                      [=](const std::string& v) {
                        double x = 0;
                        const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
                        if (r.ec != std::errc() || r.ptr != v.data() + v.size() || !std::isfinite(x)) {
                          throw UsageError(cat(program, ": --", name, " needs a number, got '", v, "'"));
                        }
                        if (x < min || x > max) {
                          throw UsageError(cat(program, ": --", name, " must be between ", min, " and ", max, ", got ", x));
                        }
                        *target = x;
                      },
                      cat(*target)});
}

void Args::choice(const std::string& name, const std::string& help, std::string* target,
                  const std::vector<std::string>& choices) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
  const std::string program = program_;
  options_.push_back({name, help, list, false, false, false,
                      [=](const std::string& v) {
                        for (const auto& c : choices) {
                          if (c == v) {
                            *target = v;
                            return;
                          }
                        }
                        throw UsageError(cat(program, ": --", name, " must be one of ", list, ", got '", v, "'"));
                      },
                      *target});
}

bool Args::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) != 0) throw UsageError(cat(program_, ": unexpected argument '", arg, "' (options start with --)"));
    std::string value;
    bool has_value = false;
    if (const auto eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    Option* found = nullptr;
    for (Option& o : options_) {
      if ("--" + o.name == arg) found = &o;
    }
    if (!found) throw UsageError(cat(program_, ": unknown option '", arg, "' (see --help)"));
    if (found->is_flag) {
      if (has_value) throw UsageError(cat(program_, ": ", arg, " takes no value"));
      found->set("");
    } else {
      if (!has_value) {
        if (i + 1 >= argc) throw UsageError(cat(program_, ": ", arg, " needs a value"));
        // "--run --resume": the value is missing, and the next option must not become it (a
        // run directory named "--resume"). A value that starts with "--" is given as --run=--x.
        const std::string next = argv[i + 1];
        if (next.rfind("--", 0) == 0) {
          throw UsageError(cat(program_, ": ", arg, " needs a value, but the next argument is the option '", next,
                               "'; give the value (", arg, " VALUE), or write ", arg, "=", next,
                               " if the value really starts with --"));
        }
        value = argv[++i];
      }
      found->set(value);
    }
    found->seen = true;
  }
  for (const Option& o : options_) {
    if (o.required && !o.seen) throw UsageError(cat(program_, ": --", o.name, " is required (see --help)"));
  }
  return true;
}

std::string Args::help() const {
  std::ostringstream out;
  out << "usage: " << program_ << " [options]\n" << summary_ << "\n\noptions:\n";
  for (const Option& o : options_) {
    std::string left = "  --" + o.name + (o.is_flag ? "" : " " + o.metavar);
    out << left << std::string(left.size() < 28 ? 28 - left.size() : 1, ' ') << o.help;
    if (o.required) out << " (required)";
    else if (!o.is_flag && !o.default_text.empty()) out << " (default " << o.default_text << ")";
    out << "\n";
  }
  out << "  --help                    this text\n";
  return out.str();
}

Device parse_device(const std::string& program, const std::string& name) {
  if (name == "cpu") return Device::cpu;
  if (name != "cuda") throw UsageError(cat(program, ": --device must be cpu or cuda, got '", name, "'"));
  try {
    (void)backend(Device::cuda);  // throws, saying why, without CUDA support or without a GPU
  } catch (const Error& e) {
    throw UsageError(cat(program, ": ", e.what()));
  }
  return Device::cuda;
}

}  // namespace qkgrad::translate
