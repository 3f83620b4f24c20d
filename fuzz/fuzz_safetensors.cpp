// libFuzzer target for the safetensors reader (io/safetensors.h), on the bytes of a file.
//
// What it checks, for any input:
//   - safetensors::parse() either returns or throws qkgrad::Error: never another exception, a
//     crash, an out-of-bounds access, undefined behaviour or a leak (the sanitizers see those);
//   - it never allocates more than the input holds: the tensors' bytes add up to at most the
//     input size (and libFuzzer's -malloc_limit_mb catches any single huge allocation);
//   - what it returns is what the format promises: CPU tensors of F32/F64/I64 with non-empty,
//     distinct names, none called "__metadata__", laid out in file order;
//   - the tensors are safe to use: their strides can be computed and they can be copied.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

namespace {

// Stops the fuzzer with a message when an invariant does not hold (libFuzzer saves the input).
void require(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz-safetensors: invariant violated: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  qkgrad::safetensors::Contents contents;
  try {
    contents = qkgrad::safetensors::parse(bytes, "fuzz.safetensors");
  } catch (const qkgrad::Error& e) {
    const std::string_view message = e.what();
    require(!message.empty(), "an Error without a message");
    return 0;  // a clean refusal is the expected outcome for most inputs
  }
  // Anything else (std::bad_alloc, std::out_of_range, ...) escapes and libFuzzer reports it.

  std::size_t tensor_bytes = 0;
  std::set<std::string> names;
  for (const auto& [name, tensor] : contents.tensors) {
    require(!name.empty() && name != "__metadata__", "a tensor has an invalid name");
    require(names.insert(name).second, "two tensors share a name");
    require(tensor.defined() && tensor.device() == qkgrad::Device::cpu, "a tensor not on the CPU");
    require(tensor.nbytes() <= size, "a tensor larger than the input");
    tensor_bytes += tensor.nbytes();
    // Use it as a program would: the kernels index with its strides, and copy it.
    (void)tensor.shape().strides();
    const qkgrad::Tensor copy = tensor.clone();
    require(copy.shape() == tensor.shape() &&
                (tensor.nbytes() == 0 ||
                 std::memcmp(copy.raw_data(), tensor.raw_data(), tensor.nbytes()) == 0),
            "a copy differs from the tensor");
  }
  require(tensor_bytes + 8 <= size, "the tensors hold more bytes than the input");
  return 0;
}
