// safetensors save(), load() and parse(). load() (from a file) and parse() (from memory) read
// in four steps, each checking what it reads before anything depends on it:
//   1. the 8-byte header length, against the file size and a 100 MB limit;
//   2. the JSON header (io/json.h), into one Entry per tensor, each checked on its own;
//   3. the byte ranges of all entries together: sorted, they must tile the data section
//      exactly (no overlaps, no holes, nothing left over);
//   4. only then the data: one allocation per tensor, of the size just checked against the
//      real file size, so a corrupt header cannot make it allocate absurd amounts.
#include "io/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string_view>

#include "core/autograd.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json.h"

// The format stores numbers little-endian, and qkgrad copies tensor bytes to and from the
// file unchanged; a big-endian machine would need byte swaps here.
static_assert(std::endian::native == std::endian::little,
              "io/safetensors.cpp assumes a little-endian machine");

namespace qkgrad::safetensors {

namespace {

constexpr const char* kMetadataKey = "__metadata__";
constexpr int64_t kMaxElements = int64_t{1} << 60;  // as Shape allows

// ---- dtypes: qkgrad's and the format's names ----

const char* format_dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f64: return "F64";
    case DType::i64: return "I64";
    case DType::bf16: return "BF16";
  }
  return "?";
}

// Sets `out` and returns true for a name qkgrad supports.
bool parse_dtype(std::string_view name, DType& out) {
  for (const DType t : {DType::f32, DType::f64, DType::i64, DType::bf16}) {
    if (name == format_dtype_name(t)) {
      out = t;
      return true;
    }
  }
  return false;
}

// One tensor as the header describes it; begin and end are offsets into the data section.
struct Entry {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// ---- load(), step 2: one header entry ----

// A non-negative integer from the header, or an Error naming the tensor and the field.
uint64_t read_count(const Json& value, const std::string& path, const std::string& name,
                    const char* field) {
  // An integer literal (not 2.0) in [0, 2^63): sizes and offsets become int64 later.
  const std::optional<int64_t> count = value.is_number_integer() ? json_exact_int(value) : std::nullopt;
  if (count && *count >= 0) return static_cast<uint64_t>(*count);
  std::string got = value.is_number() || value.is_string() ? value.dump() : std::string(json_kind_name(value));
  if (value.is_number() && !count) got += " (not an integer literal that fits in 64 bits)";
  fail(cat(path, ": tensor '", name, "': ", field, " must hold non-negative integers, got ", got,
           " (the header is corrupt)"));
}

// Checks one tensor's header entry on its own (its ranges are checked together later).
Entry read_entry(const std::string& path, const std::string& name, const Json& info,
                 uint64_t data_bytes) {
  const auto where = [&] { return cat(path, ": tensor '", name, "'"); };
  QKGRAD_CHECK(info.is_object(), where(), ": expected an object with dtype, shape and ",
               "data_offsets, got ", json_kind_name(info), " (the header is corrupt)");
  for (const auto& [key, value] : info.items()) {
    QKGRAD_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", where(),
                 " has an unknown field '", key,
                 "' (expected dtype, shape and data_offsets; the header is corrupt)");
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    QKGRAD_CHECK(info.contains(field), where(), " has no '", field, "' (the header is corrupt)");
  }
  Entry e;
  e.name = name;

  // dtype
  const Json& dtype = info.at("dtype");
  QKGRAD_CHECK(dtype.is_string(), where(), ": dtype must be a string, got ",
               json_kind_name(dtype), " (the header is corrupt)");
  QKGRAD_CHECK(parse_dtype(dtype.get_ref<const std::string&>(), e.dtype), where(), " has dtype '",
               dtype.get_ref<const std::string&>(), "', which qkgrad does not read (it reads F32, F64, I64 and BF16; ",
               "convert the tensor to one of them before saving)");

  // shape, and its element count (checked for overflow at every step)
  const Json& shape = info.at("shape");
  QKGRAD_CHECK(shape.is_array(), where(), ": shape must be an array of sizes, got ",
               json_kind_name(shape), " (the header is corrupt)");
  QKGRAD_CHECK(shape.size() <= static_cast<std::size_t>(Shape::kMaxRank), where(), " has rank ",
               shape.size(), "; qkgrad tensors have at most ", Shape::kMaxRank, " dimensions");
  int64_t numel = 1;
  int64_t span = 1;  // the product of the non-zero sizes: strides must fit even when numel is 0
  for (const Json& dim : shape) {
    e.shape.push_back(static_cast<int64_t>(read_count(dim, path, name, "shape")));
    QKGRAD_CHECK(!__builtin_mul_overflow(numel, e.shape.back(), &numel) && numel < kMaxElements,
                 where(), " has shape ", shape.dump(),
                 ", more than 2^60 elements (the header is corrupt)");
    QKGRAD_CHECK(!__builtin_mul_overflow(span, std::max<int64_t>(e.shape.back(), 1), &span) &&
                     span < kMaxElements,
                 where(), " has shape ", shape.dump(), ", whose non-zero sizes multiply to more ",
                 "than 2^60, too many to index even with no elements (the header is corrupt)");
  }

  // data_offsets: [begin, end) inside the data section, exactly numel * dtype_size bytes
  const Json& offsets = info.at("data_offsets");
  QKGRAD_CHECK(offsets.is_array() && offsets.size() == 2, where(),
               ": data_offsets must be an array [begin, end], got ",
               offsets.is_array() ? offsets.dump() : std::string(json_kind_name(offsets)),
               " (the header is corrupt)");
  e.begin = read_count(offsets[0], path, name, "data_offsets");
  e.end = read_count(offsets[1], path, name, "data_offsets");
  QKGRAD_CHECK(e.begin <= e.end, where(), " has data_offsets [", e.begin, ", ", e.end,
               "] with begin after end (the header is corrupt)");
  QKGRAD_CHECK(e.end <= data_bytes, where(), " claims bytes [", e.begin, ", ", e.end,
               ") but the data section has only ", data_bytes,
               " bytes (the file is truncated or corrupt)");
  const uint64_t expected = static_cast<uint64_t>(numel) * dtype_size(e.dtype);
  QKGRAD_CHECK(e.end - e.begin == expected, where(), " has shape ", shape.dump(), " and dtype ",
               dtype.get_ref<const std::string&>(), ", which take ", expected, " bytes, but its data_offsets [",
               e.begin, ", ", e.end, ") hold ", e.end - e.begin, " (the header is corrupt)");
  return e;
}

// ---- load(), step 3: all ranges together ----

// Sorts the entries by their place in the data section and checks that they tile it exactly.
void check_coverage(const std::string& path, std::vector<Entry>& entries, uint64_t data_bytes) {
  // A stable sort keeps empty tensors (begin == end) at the same offset in header order.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;  // the data section up to here is claimed by exactly one tensor
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    QKGRAD_CHECK(e.begin >= covered, path, ": tensor '", e.name, "' bytes [", e.begin, ", ",
                 e.end, ") overlap tensor '", previous ? previous->name : "", "' bytes [",
                 previous ? previous->begin : 0, ", ", covered, ") (the header is corrupt)");
    QKGRAD_CHECK(e.begin == covered, path, ": bytes [", covered, ", ", e.begin,
                 ") of the data section belong to no tensor (a hole before tensor '", e.name,
                 "'; the header is corrupt)");
    covered = e.end;
    previous = &e;
  }
  QKGRAD_CHECK(covered == data_bytes, path, ": the data section has ", data_bytes,
               " bytes but the tensors cover only ", covered,
               " (the file has trailing bytes, or its header is corrupt)");
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void save(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
          const Metadata& metadata) {
  // The header, with each tensor's bytes placed right after the previous tensor's.
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;  // an object of strings
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    QKGRAD_CHECK(!name.empty() && name != kMetadataKey, "safetensors::save('", path,
                 "'): a tensor's name must be non-empty and not \"", kMetadataKey, "\"");
    QKGRAD_CHECK(names.insert(name).second, "safetensors::save('", path, "'): the name '", name,
                 "' is used twice; give each tensor its own name");
    QKGRAD_CHECK(t.defined(), "safetensors::save('", path, "'): tensor '", name,
                 "' is undefined (a default-constructed Tensor)");
    Json shape = Json::array();
    for (const int64_t d : t.shape()) shape.push_back(d);
    const uint64_t begin = offset;
    offset += t.nbytes();
    header[name] = {{"dtype", format_dtype_name(t.dtype())}, {"shape", shape}, {"data_offsets", {begin, offset}}};
  }
  // Spaces (JSON whitespace) pad the header to a multiple of 8, so the data is 8-byte aligned.
  std::string text = dump_json(header);
  text.append((8 - text.size() % 8) % 8, ' ');

  write_file_atomically(path, [&](std::FILE* file) {
    const uint64_t length = text.size();  // little-endian, as the static_assert above ensures
    if (std::fwrite(&length, 1, sizeof length, file) != sizeof length) return;
    if (std::fwrite(text.data(), 1, text.size(), file) != text.size()) return;
    // One tensor at a time on the host, so at most one extra copy of a GPU tensor exists.
    // No autograd: moving a parameter that requires grad is fine for saving.
    NoGradGuard no_grad;
    for (const auto& [name, t] : tensors) {
      const Tensor host = t.to(Device::cpu);
      if (host.nbytes() == 0) continue;
      // On a short write, stop: write_file_atomically sees the error and reports it.
      if (std::fwrite(host.raw_data(), 1, host.nbytes(), file) != host.nbytes()) return;
    }
  });
}

namespace {

// Steps 1 to 4 of load() and parse(), on `total_bytes` bytes that `read_exactly(dst, n, what)`
// hands out in order (from a file, or from memory). `name` starts every error message.
template <typename ReadExactly>
Contents read_contents(const std::string& name, uint64_t total_bytes, ReadExactly read_exactly) {
  const std::string& path = name;

  // Step 1: the header length.
  QKGRAD_CHECK(total_bytes >= 8, path, ": the file is ", total_bytes,
               " bytes, too short for the 8-byte header length (the file is truncated or not "
               "a safetensors file)");
  uint64_t header_bytes = 0;
  read_exactly(&header_bytes, 8, "the header length");
  QKGRAD_CHECK(header_bytes <= total_bytes - 8, path, ": the header length says ", header_bytes,
               " bytes but only ", total_bytes - 8, " follow it (the file is truncated or not a ",
               "safetensors file)");
  QKGRAD_CHECK(header_bytes <= kMaxHeaderBytes, path, ": the header length ", header_bytes,
               " is over the limit of ", kMaxHeaderBytes,
               " bytes (the file is corrupt or not a safetensors file)");
  const uint64_t data_bytes = total_bytes - 8 - header_bytes;

  // Step 2: the JSON header, one entry at a time.
  std::string text(header_bytes, '\0');
  read_exactly(text.data(), header_bytes, "the header");
  Json header;
  try {
    header = parse_json(text, path);
  } catch (const Error& e) {
    fail(cat(e.what(), " (in the JSON header, which starts at byte 8; the file is corrupt or not "
             "a safetensors file)"));
  }
  QKGRAD_CHECK(header.is_object(), path, ": the header is ", json_kind_name(header),
               ", not a JSON object (the file is corrupt or not a safetensors file)");
  Contents contents;
  std::vector<Entry> entries;
  for (const auto& [key, info] : header.items()) {  // the parser already refused duplicates
    if (key != kMetadataKey) {
      entries.push_back(read_entry(path, key, info, data_bytes));
      continue;
    }
    QKGRAD_CHECK(info.is_object(), path, ": __metadata__ must be an object of strings, got ",
                 json_kind_name(info));
    for (const auto& item : info.items()) {
      const std::string& meta_key = item.key();
      const Json& value = item.value();
      QKGRAD_CHECK(value.is_string(), path, ": __metadata__ value '", meta_key,
                   "' must be a string, got ", json_kind_name(value),
                   " (safetensors metadata maps strings to strings)");
      contents.metadata[meta_key] = value.get<std::string>();
    }
  }

  // Step 3: the ranges tile the data section, which then starts right after the header.
  check_coverage(path, entries, data_bytes);

  // Step 4: the data, in file order, straight into each tensor's memory.
  for (const Entry& e : entries) {
    Tensor t;
    try {
      t = Tensor::empty(Shape(e.shape), e.dtype, Device::cpu);
    } catch (const std::exception& error) {  // out of memory (std::bad_alloc or Error)
      fail(cat(path, ": cannot allocate tensor '", e.name, "' (", e.end - e.begin, " bytes): ",
               error.what()));
    }
    read_exactly(t.raw_data(), e.end - e.begin, cat("tensor '", e.name, "'"));
    contents.tensors.emplace_back(e.name, std::move(t));
  }
  return contents;
}

}  // namespace

Contents load(const std::string& path) {
  File file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) {
    const int err = errno;
    fail(cat("safetensors::load: cannot open '", path, "': ", std::strerror(err),
             "; check the path and its permissions"));
  }
  struct stat info {};
  QKGRAD_CHECK(::fstat(::fileno(file.get()), &info) == 0 && S_ISREG(info.st_mode), path,
               ": not a regular file (a directory?); give the path of a .safetensors file");
  const auto file_bytes = static_cast<uint64_t>(info.st_size);

  // Reads exactly n bytes, or explains why it could not. The data goes straight from the file
  // into each tensor, so loading needs no second copy of the file in memory.
  return read_contents(path, file_bytes, [&](void* dst, uint64_t n, const std::string& what) {
    const std::size_t got = n == 0 ? 0 : std::fread(dst, 1, n, file.get());
    QKGRAD_CHECK(got == n, path, ": reading ", what, " stopped after ", got, " of ", n,
                 " bytes (", std::ferror(file.get()) ? std::strerror(errno) : "end of file",
                 "; was the file changed while being read?)");
  });
}

Contents parse(std::string_view bytes, const std::string& name) {
  uint64_t position = 0;
  return read_contents(name, bytes.size(), [&](void* dst, uint64_t n, const std::string& what) {
    // read_contents never asks for more than it checked is there; this is a second guard.
    QKGRAD_CHECK(n <= bytes.size() - position, name, ": reading ", what, " needs ", n,
                 " bytes but only ", bytes.size() - position, " are left");
    if (n > 0) std::memcpy(dst, bytes.data() + position, n);
    position += n;
  });
}

}  // namespace qkgrad::safetensors
