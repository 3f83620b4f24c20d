// Usage errors (exit status 2) and --device values, shared by the training run and the
// command-line program.
#pragma once

#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace qkgrad::translation {

// A usage error: the program prints it and exits with status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

// The device named by a --device value ("cpu" or "cuda"), checked before any work starts: cuda
// in a build without CUDA, or on a machine without a usable GPU, is a UsageError that starts
// with `program` and carries the backend's explanation.
Device parse_device(const std::string& program, const std::string& name);

}  // namespace qkgrad::translation
