#include "core/storage.h"

#include "core/backend.h"

namespace qkgrad {

Storage::Storage(Device device, std::size_t bytes) : bytes_(bytes), device_(device) {
  data_ = backend(device).allocate(bytes);
}

Storage::~Storage() { backend(device_).deallocate(data_, bytes_); }

}  // namespace qkgrad
