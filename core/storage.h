// Storage: one refcounted block of device memory. Tensors point at a Storage through a
// shared_ptr, so a reshape can share it and the memory goes back to the device's caching
// allocator when the last tensor using it dies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace qkgrad {

class Storage {
 public:
  // Uninitialised memory from the caching allocator of `device`.
  Storage(Device device, std::size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }

  // Bumped by every in-place write, so autograd can tell when a tensor it saved for the
  // backward pass was overwritten in between (which would make the gradient wrong).
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
};

}  // namespace qkgrad
