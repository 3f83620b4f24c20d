#include "commands.h"

namespace qkgrad::translate_cli {

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

}  // namespace qkgrad::translate_cli
