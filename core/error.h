// Errors. Every failure a user can cause throws qkgrad::Error with a message that names the
// op, the shapes involved and what to do about it, e.g.
//   matmul: inner dimensions differ: a is [2, 3] and b is [4, 5] (a's last dim 3 != b's dim 4)
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace qkgrad {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An error in how a program was called (a bad option, an impossible combination of settings,
// --device cuda without CUDA), found before any work starts: programs print it and exit with
// status 2.
class UsageError : public Error {
 public:
  using Error::Error;
};

[[noreturn]] void fail(const std::string& message);

// Concatenates anything printable with operator<< into one string.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace qkgrad

// QKGRAD_CHECK(condition, message parts...): throw qkgrad::Error when the condition is false.
#define QKGRAD_CHECK(cond, ...)                         \
  do {                                                  \
    if (!(cond)) ::qkgrad::fail(::qkgrad::cat(__VA_ARGS__)); \
  } while (0)
