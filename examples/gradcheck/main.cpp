// qkgrad-gradcheck: checks the hand-derived backward of every differentiable op against
// float64 central differences (core/gradcheck.h) and prints one line per op:
//   op <name> inputs <n> max_abs_err <e> max_rel_err <e> PASS|FAIL
//   qkgrad-gradcheck [--list] [--markdown] [--op NAME] [--verbose] [--seed N]
// Exit status 0 when every op passes, 1 otherwise, 2 on a usage error (cli/'s Args, CLI11, as
// qkgrad-translate's: a bad or missing value or an unknown option is named in the message).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

#include "cli/args.h"
#include "core/error.h"
#include "ops/checks/op_cases.h"
#include "ops/op_table.h"

int main(int argc, char** argv) {
  using namespace qkgrad;
  bool list = false, verbose = false, markdown = false;
  std::string only;
  uint64_t seed = 0;
  Args args("qkgrad-gradcheck", "Checks the backward of every differentiable op against float64 central differences.",
            kProgramStyle);
  args.flag("list", "print the names of all differentiable ops and exit", &list);
  args.flag("markdown", "print docs/ops.md (every op's forward and backward) and exit", &markdown);
  args.option("op", "check only this op (see --list)", &only)->type_name("NAME");
  args.flag("verbose", "also print every case of every op", &verbose);
  args.option("seed", "seed for the random inputs", &seed, 0, std::numeric_limits<int64_t>::max());
  if (const auto status = args.parse_main(argc, argv)) return *status;

  if (markdown) {
    std::fputs(op_table_markdown().c_str(), stdout);
    return 0;
  }
  if (list) {
    for (const OpInfo& op : op_table()) std::printf("%s\n", op.name.c_str());
    return 0;
  }

  bool found = only.empty();
  int failures = 0;
  for (const OpInfo& op : op_table()) {
    if (!only.empty() && op.name != only) continue;
    found = true;
    std::size_t inputs = 0, cases = 0;
    double max_abs = 0, max_rel = 0;
    bool passed = true;
    for (const OpCase& c : op_cases()) {
      if (c.op != op.name) continue;
      ++cases;
      inputs = std::max(inputs, c.inputs.size());
      try {
        const GradcheckResult r = run_op_case(c, seed);
        max_abs = std::max(max_abs, r.max_abs_err);
        max_rel = std::max(max_rel, r.max_rel_err);
        passed = passed && r.passed;
        if (verbose || !r.passed) {
          std::printf("  case %-55s max_abs_err %.3e max_rel_err %.3e %s\n", c.name.c_str(),
                      r.max_abs_err, r.max_rel_err, r.passed ? "PASS" : "FAIL");
          for (const InputCheck& in : r.inputs) {
            if (!in.passed) std::printf("    input %d: %s\n", in.input, in.worst.c_str());
          }
        }
      } catch (const Error& e) {
        passed = false;
        std::printf("  case %s threw: %s\n", c.name.c_str(), e.what());
      }
    }
    if (cases == 0) {
      passed = false;
      std::printf("  no check case is registered for op %s (add one in ops/checks/)\n", op.name.c_str());
    }
    std::printf("op %s inputs %zu max_abs_err %.3e max_rel_err %.3e %s\n", op.name.c_str(), inputs,
                max_abs, max_rel, passed ? "PASS" : "FAIL");
    if (!passed) ++failures;
  }
  if (!found) {
    std::fprintf(stderr, "qkgrad-gradcheck: no op named '%s' (see --list)\n", only.c_str());
    return 2;
  }
  return failures == 0 ? 0 : 1;
}
