// --device values, shared by the training runs and the command-line programs (usage errors are
// core/error.h's UsageError).
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace qkgrad::training {

// The device named by a --device value ("cpu" or "cuda"), checked before any work starts: cuda
// in a build without CUDA, or on a machine without a usable GPU, is a UsageError that starts
// with `program` and carries the backend's explanation.
Device parse_device(const std::string& program, const std::string& name);

}  // namespace qkgrad::training
