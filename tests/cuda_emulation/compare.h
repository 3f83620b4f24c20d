// What the emulation drivers share: random inputs, the comparison of an emulated result with the
// CPU backend's, and the report ("PASS name" lines, then "N passed, N failed").
#pragma once
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace qkgrad::emulation {

inline Tensor random_tensor(const Shape& shape, DType dtype, std::mt19937& rng, double stddev = 1.0) {
  std::normal_distribution<double> normal(0.0, stddev);
  std::vector<double> values(static_cast<std::size_t>(shape.numel()));
  for (double& x : values) x = normal(rng);
  return Tensor::from_vector(values, shape, dtype);
}

// Every element of got within tol of want, relative to 1 + |want| (NaN only where want is NaN,
// an infinity only where want has the same one). Returns a message naming the worst element, or
// "" when all agree.
inline std::string mismatch(const char* name, const Tensor& got, const Tensor& want, double tol) {
  const std::vector<double> a = got.to_vector(), b = want.to_vector();
  if (a.size() != b.size()) return std::string(name) + ": sizes differ";
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    double err = 0;
    if (std::isnan(a[i]) || std::isnan(b[i])) {
      err = std::isnan(a[i]) == std::isnan(b[i]) ? 0.0 : INFINITY;
    } else if (std::isinf(a[i]) || std::isinf(b[i])) {
      err = a[i] == b[i] ? 0.0 : INFINITY;
    } else {
      err = std::abs(a[i] - b[i]) / (1 + std::abs(b[i]));
    }
    if (!(err <= worst)) {
      worst = err;
      at = i;
    }
  }
  if (worst <= tol) return "";
  char text[200];
  std::snprintf(text, sizeof text, "%s: relative error %.3g at element %zu (emulated %.9g, cpu %.9g)", name,
                worst, at, a[at], b[at]);
  return text;
}

// Collects the failures of one configuration: check(name, got, want, tol) adds a message when
// they differ.
struct Failures {
  std::vector<std::string> messages;
  void check(const char* name, const Tensor& got, const Tensor& want, double tol) {
    const std::string message = mismatch(name, got, want, tol);
    if (!message.empty()) messages.push_back(message);
  }
};

// The report: one line per configuration and dtype, then the totals.
struct Report {
  int passed = 0, failed = 0;
  void add(const std::string& name, DType dtype, const std::vector<std::string>& failures) {
    std::printf("%s %s, %s\n", failures.empty() ? "PASS" : "FAIL", name.c_str(), dtype == DType::f64 ? "f64" : "f32");
    for (const std::string& f : failures) std::printf("    %s\n", f.c_str());
    std::fflush(stdout);
    (failures.empty() ? passed : failed) += 1;
  }
  int finish() const {
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
  }
};

}  // namespace qkgrad::emulation
