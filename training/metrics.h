// RUNDIR/metrics.jsonl: one JSON object per line, each with its "step" and numbers (the
// training loss and learning rate of a log line, the dev scores of an evaluation, ...), or
// objects of numbers (the attention gains "g"). The history is also kept in memory, for the
// curves; on --resume it is read back up to the checkpoint's step.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/json.h"

namespace qkgrad::training {

using Series = std::vector<std::pair<double, double>>;  // (step, value) points

struct History {
  std::vector<Json> lines;  // every line of metrics.jsonl, in order

  // The points of `name` in every line that has it (and `with`, when given: the learning rate
  // of the log lines alone is series("lr", "train_loss")).
  Series series(const std::string& name, const std::string& with = "") const;
  // One series per member of the object `name` in the lines (the gains: "g" -> {parameter: points}).
  std::map<std::string, Series> object_series(const std::string& name) const;
};

// Appends `line` to the file and to `history`. A full disk is an error that says what to do.
void append_metrics(const std::string& path, const Json& line, History& history);

// On resume: keeps the lines up to the checkpoint's step (later ones were never checkpointed)
// and rewrites the file with them. A last line without its newline was being written when the
// run was killed: it is dropped and counted in *dropped_partial. A damaged line is an error
// naming its line number. No file: an empty history.
History reload_metrics(const std::string& path, int64_t up_to_step, int64_t* dropped_partial);

// The first best point of a series (the trainer keeps the first best), or none.
std::optional<std::pair<double, double>> best_point(const Series& series, bool lower_is_better);

}  // namespace qkgrad::training
