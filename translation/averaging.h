// Checkpoint averaging (as fairseq's average_checkpoints.py and OpenNMT's average_models): a new
// model-only checkpoint whose every parameter is the mean of that parameter in the inputs,
//   θ̄ = (1/n) Σ_i θ_i,
// summed in float64 in the order given (so the result is reproducible), then stored in the
// parameters' dtype. Averaging the last few checkpoints of a run usually gains a little BLEU
// over the last one alone: it smooths the noise of the final steps.
#pragma once

#include <string>
#include <vector>

namespace qkgrad::translation {

// Averages the checkpoint directories `inputs` (at least one; the same architecture, names and
// shapes, else an Error naming the first mismatch) into `out` (written atomically; it may not
// be one of the inputs).
void average_checkpoints(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace qkgrad::translation
