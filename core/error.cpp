#include "core/error.h"

namespace qkgrad {

void fail(const std::string& message) { throw Error(message); }

}  // namespace qkgrad
