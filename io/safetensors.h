// Saving and loading named tensors in the safetensors format
// (https://github.com/huggingface/safetensors), so that checkpoints can be read by other tools
// (Python's safetensors package, or plain NumPy) and qkgrad can read theirs.
//
// A file is:
//   8 bytes     N, the length of the header, an unsigned little-endian 64-bit integer
//   N bytes     the header: a JSON object, padded with spaces
//                 {"__metadata__": {"step": "1000"},               (optional, string -> string)
//                  "encoder.w": {"dtype": "F32", "shape": [512, 512],
//                                "data_offsets": [0, 1048576]}, ...}
//   the rest    the data section: each tensor's elements, row-major, little-endian, at
//               [begin, end) counted from the start of the data section
//
// qkgrad writes the tensors in the order given, back to back, and pads the header with spaces
// to a multiple of 8 bytes (as the reference implementation does) so the data is 8-byte
// aligned. load() checks everything before it allocates or reads a byte of data: a truncated
// or corrupted file gives a qkgrad::Error naming the file and the first problem, never a crash
// or a huge allocation. docs/safetensors.md lists every check and shows how to read the files
// from Python.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace qkgrad::safetensors {

using Metadata = std::map<std::string, std::string>;

struct Contents {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order, CPU tensors
  Metadata metadata;
};

// Supported element types, by their safetensors names: F32, F64, I64 and BF16.
// Writes the file atomically (io/atomic_file.h): after a failure the old file is still there.
// The tensors may live on any device (each is copied to the host in turn). Names must be
// unique, non-empty and not "__metadata__".
void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const Metadata& metadata = {});

// Reads and validates the whole file; the tensors come back in the order of their data in
// the file (for a file written by save(), the order they were saved in).
Contents load(const std::string& path);

// The same as load() on the bytes of a file already in memory; `name` (a path, say) starts
// every error message. Any input either parses or throws qkgrad::Error (fuzz/ checks this).
Contents parse(std::string_view bytes, const std::string& name);

// The most header bytes load() accepts (100 MB), as the reference implementation does.
constexpr std::size_t kMaxHeaderBytes = 100'000'000;

}  // namespace qkgrad::safetensors
