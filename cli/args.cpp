#include "cli/args.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <vector>

namespace qkgrad {

namespace {

// CLI11 transforms: each returns "" for a good value, else what is wrong with it (CLI11 puts the
// option's name in front). A good value is written back in a form CLI11's own conversion reads
// as meant: an integer in plain decimal (CLI11 would read "010" as octal eight and "0x10" as
// hex; here "010" is ten and "0x10" is not an integer), a number with 17 digits (read back
// exactly).
CLI::Validator integer_in(int64_t min, int64_t max) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        int64_t x = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (end != v.data() + v.size() || ec == std::errc::invalid_argument) return cat("needs an integer, got '", v, "'");
        if (ec != std::errc() || x < min || x > max) return cat("must be between ", min, " and ", max, ", got ", v);
        v = std::to_string(x);
        return "";
      },
      "", "integer");
}

CLI::Validator number_where(std::function<bool(double)> ok, const std::string& what) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        double x = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
        if (end != v.data() + v.size() || ec != std::errc() || !std::isfinite(x)) return cat("needs a number, got '", v, "'");
        if (!ok(x)) return cat("must be ", what, ", got ", v);
        char text[32];
        std::snprintf(text, sizeof text, "%.17g", x);
        v = text;
        return "";
      },
      "", "number");
}

CLI::Validator number_in(double min, double max) {
  return number_where([=](double x) { return x >= min && x <= max; }, cat("between ", min, " and ", max));
}

CLI::Validator one_of(const std::vector<std::string>& choices, const std::string& list) {
  return CLI::Validator(
      [=](std::string& v) -> std::string {
        for (const auto& c : choices) {
          if (c == v) return "";
        }
        return cat("must be one of ", list, ", got '", v, "'");
      },
      "", "choice");
}

const char* const kHiddenGroup = "(hidden: for the tests)";

// The edit distance (Levenshtein) of two flag names.
std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

Args::Args(std::string program, std::string summary, HelpStyle style)
    : program_(std::move(program)), style_(std::move(style)), app_(std::move(summary), program_) {
  if (style_.lowercase) {
    app_.get_formatter()->label("Usage", "usage");
    app_.get_formatter()->label("OPTIONS", "options");
    app_.option_defaults()->group("options");
  }
  app_.get_formatter()->column_width(30);
  app_.set_help_flag(style_.help_flag, "this text");
  app_.set_version_flag("--version", cat(program_, " ", QKGRAD_VERSION, " (qkgrad ", QKGRAD_VERSION, ")"),
                        "the program's version");
  // As before CLI11: an option given twice takes its last value.
  app_.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
}

CLI::Option* Args::flag(const std::string& name, const std::string& help, bool* target) {
  return app_.add_flag("--" + name, *target, help)->disable_flag_override();
}

CLI::Option* Args::option(const std::string& name, const std::string& help, std::string* target, bool required) {
  CLI::Option* o = app_.add_option("--" + name, *target, help)->type_name("TEXT");
  if (required) {
    o->required();
  } else if (!target->empty()) {
    o->capture_default_str();
  }
  return o;
}

CLI::Option* Args::list(const std::string& name, const std::string& help, std::vector<std::string>* target,
                        bool required) {
  CLI::Option* o = app_.add_option("--" + name, *target, help)->type_name("TEXT")->type_size(1)->expected(1);
  o->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  if (required) o->required();
  return o;
}

CLI::Option* Args::integer(CLI::Option* o, int64_t min, int64_t max) {
  return o->type_name("N")->transform(integer_in(min, max))->capture_default_str();
}

std::string Args::with_range(const std::string& help, int64_t min, int64_t max) const {
  return style_.ranges ? cat(help, " (", min, " to ", max, ")") : help;
}

CLI::Option* Args::option(const std::string& name, const std::string& help, double* target, double min, double max) {
  return app_.add_option("--" + name, *target, help)->type_name("X")->transform(number_in(min, max))->capture_default_str();
}

CLI::Option* Args::option(const std::string& name, const std::string& help, double* target,
                          std::function<bool(double)> ok, const std::string& what) {
  return app_.add_option("--" + name, *target, help)
      ->type_name("X")
      ->transform(number_where(std::move(ok), what))
      ->capture_default_str();
}

CLI::Option* Args::option(const std::string& name, const std::string& help, double shown,
                          std::function<void(double)> set, double min, double max) {
  return app_.add_option_function<double>("--" + name, std::move(set), help)
      ->type_name("X")
      ->transform(number_in(min, max))
      ->default_str(CLI::detail::to_string(shown));
}

CLI::Option* Args::choice(const std::string& name, const std::string& help, std::string* target,
                          const std::vector<std::string>& choices) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
  CLI::Option* o = app_.add_option("--" + name, *target, help)->type_name(list)->check(one_of(choices, list));
  if (!target->empty()) o->capture_default_str();
  return o;
}

CLI::Option* Args::choice(const std::string& name, const std::string& help, const std::string& shown,
                          std::function<void(const std::string&)> set, const std::vector<std::string>& choices) {
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
  return app_.add_option_function<std::string>("--" + name, std::move(set), help)
      ->type_name(list)
      ->check(one_of(choices, list))
      ->default_str(shown);
}

CLI::Option* Args::custom(const std::string& name, const std::string& help, const std::string& type_name,
                          std::function<std::string(const std::string&)> take) {
  const std::string flag = "--" + name;
  return app_
      .add_option_function<std::string>(
          flag,
          [flag, take = std::move(take)](const std::string& v) {
            const std::string wrong = take(v);
            if (!wrong.empty()) throw CLI::ValidationError(flag, wrong);
          },
          help)
      ->type_name(type_name);
}

bool Args::parse(int argc, char** argv, int first) {
  std::vector<const char*> args = {program_.c_str()};
  for (int i = first; i < argc; ++i) {
    // CLI11 would take the next argument as the value even when it is an option ("--run
    // --resume" would train into ./--resume): refused here, naming both.
    const std::string arg = argv[i];
    const CLI::Option* o = arg.rfind("--", 0) == 0 && arg.find('=') == std::string::npos ? app_.get_option_no_throw(arg) : nullptr;
    if (o != nullptr && o->get_expected_min() > 0 && i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) == 0) {
      throw UsageError(cat(program_, ": ", arg, " needs a value, but the next argument is the option '", argv[i + 1],
                                 "'; give the value (", arg, " VALUE), or write ", arg, "=", argv[i + 1],
                                 " if the value really starts with --"));
    }
    args.push_back(argv[i]);
  }
  try {
    app_.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::CallForHelp&) {
    std::fputs(help().c_str(), stdout);
    return false;
  } catch (const CLI::CallForVersion& e) {
    std::printf("%s\n", e.what());
    return false;
  } catch (const CLI::ExtrasError& e) {
    throw UsageError(cat(program_, ": ", e.what(), suggestion(), " (see --help)"));
  } catch (const CLI::ParseError& e) {
    throw UsageError(cat(program_, ": ", e.what(), " (see --help)"));
  }
  for (const auto& [o, why] : once_) {
    if (o->count() <= 1) continue;
    std::string values;
    for (const std::string& v : o->results()) values += cat(values.empty() ? "" : ", ", "'", v, "'");
    throw UsageError(cat(program_, ": ", o->get_name(), " given ", o->count(), " times (", values, "); give it once: ", why));
  }
  return true;
}

// After an unknown argument: "; did you mean --max-steps?" for the first unknown --flag that is
// close to a known one (at most 2 edits, fewer than half its letters), else "".
std::string Args::suggestion() const {
  for (const std::string& extra : app_.remaining()) {
    if (extra.rfind("--", 0) != 0) continue;
    const std::string name = extra.substr(2, extra.find('=') == std::string::npos ? std::string::npos : extra.find('=') - 2);
    std::string best;
    std::size_t best_distance = std::min<std::size_t>(3, (name.size() + 1) / 2);
    for (const CLI::Option* o : app_.get_options()) {
      if (o->get_group() == kHiddenGroup) continue;
      for (const std::string& known : o->get_lnames()) {
        const std::size_t d = edit_distance(name, known);
        if (d < best_distance) {
          best_distance = d;
          best = known;
        }
      }
    }
    if (!best.empty()) return cat("; did you mean --", best, "?");
  }
  return "";
}

CLI::Option* Args::once(CLI::Option* o, const std::string& why) {
  once_.emplace_back(o, why);
  return o;
}

std::optional<int> Args::parse_main(int argc, char** argv) {
  try {
    if (!parse(argc, argv, 1)) return 0;
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return std::nullopt;
}

CLI::Option* Args::hidden(CLI::Option* o) { return o->group(kHiddenGroup); }

// CLI11's help, less the section of the hidden options ("GROUP:" and its lines, up to the next
// blank line).
std::string Args::help() const {
  const std::string text = app_.help();
  const std::string header = cat("\n", kHiddenGroup, ":\n");
  const std::size_t start = text.find(header);
  if (start == std::string::npos) return text;
  std::size_t end = text.find("\n\n", start + header.size() - 1);  // the section's last line ends here
  end = end == std::string::npos ? text.size() : end + 2;
  return text.substr(0, start + 1) + text.substr(end);
}

void Args::footer(const std::string& text) { app_.footer(text); }

std::string Args::value_of(int argc, char** argv, int first, const std::string& name, const std::string& fallback) {
  CLI::App lenient;
  lenient.set_help_flag();  // --help is parse()'s
  lenient.allow_extras();
  std::string value = fallback;
  lenient.add_option("--" + name, value)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::vector<const char*> args = {"value_of"};
  for (int i = first; i < argc; ++i) {
    // "--NAME --other": parse() refuses it (a value is never the next option); so does this pass.
    if (argv[i] == "--" + name && (i + 1 >= argc || argv[i + 1][0] == '-')) return fallback;
    args.push_back(argv[i]);
  }
  try {
    lenient.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError&) {
    return fallback;  // e.g. --NAME without a value: parse() reports it
  }
  return value;
}

bool Args::has_flag(int argc, char** argv, int first, const std::string& name) {
  CLI::App lenient;
  lenient.set_help_flag();
  lenient.allow_extras();
  bool given = false;
  lenient.add_flag("--" + name, given);
  std::vector<const char*> args = {"has_flag"};
  for (int i = first; i < argc; ++i) args.push_back(argv[i]);
  try {
    lenient.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError&) {
    return false;  // e.g. --NAME=value: parse() reports it
  }
  return given;
}

}  // namespace qkgrad
