// io/safetensors.h and io/atomic_file.h: round trips, the bytes on disk, and that truncated,
// corrupted or lying files give a qkgrad::Error naming the file (never a crash), and that a
// failed write leaves the old file intact.
#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

#include "core/backend.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "io/atomic_file.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "temp_dir.h"

using namespace qkgrad;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;

namespace {

using testing::TempDir;

// The entries in the directory (a write that failed or finished leaves no temporary file).
std::size_t count_files(const TempDir& dir) {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path)) ++n;
  return n;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file made by hand: the 8-byte length, the header as given, then `data_bytes`
// zero bytes.
std::string make_file(const std::string& header, std::size_t data_bytes) {
  const uint64_t n = header.size();
  std::string bytes(reinterpret_cast<const char*>(&n), 8);
  return bytes + header + std::string(data_bytes, '\0');
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0);
}

// Loads `path` and returns the error message, or "" when it loaded. Any exception other
// than qkgrad::Error fails the test.
std::string load_error(const std::string& path) {
  try {
    safetensors::load(path);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

// Four tensors of every kind load() must handle, saved in this order.
std::vector<std::pair<std::string, Tensor>> sample_tensors() {
  Generator gen(7);
  Tensor w = Tensor::randn({3, 4}, gen, DType::f32);
  w.requires_grad_();  // parameters are saved as they are
  return {
      {"encoder.w", w},
      {"scale", Tensor::scalar(0.1, DType::f64)},                         // rank 0
      {"ids", Tensor::from_ids({-1, 0, (int64_t{1} << 62) + 1, 7}, {2, 2})},  // exact int64
      {"empty", Tensor::empty({0}, DType::f32)},                          // no bytes at all
      {"decoder.b", Tensor::randn({2, 1, 3}, gen, DType::f64)},
  };
}

}  // namespace

TEST_CASE("safetensors: save and load round-trip f32, f64 and i64 tensors and metadata",
          "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "model.safetensors";
  const auto tensors = sample_tensors();
  const safetensors::Metadata metadata{{"step", "1000"}, {"note", "caf\xC3\xA9 \"quoted\"\n"}};
  safetensors::save(path, tensors, metadata);

  const safetensors::Contents loaded = safetensors::load(path);
  CHECK(loaded.metadata == metadata);
  REQUIRE(loaded.tensors.size() == tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(tensors[i].first);
    CHECK(loaded.tensors[i].first == tensors[i].first);  // in the order saved
    CHECK(loaded.tensors[i].second.device() == Device::cpu);
    CHECK(same_bytes(loaded.tensors[i].second, tensors[i].second));
  }
  CHECK(loaded.tensors[1].second.rank() == 0);
  CHECK(loaded.tensors[2].second.to_ids()[2] == (int64_t{1} << 62) + 1);
  CHECK(count_files(dir) == 1);  // no temporary file left behind

  // Saving again replaces the file; no tensors and no metadata is a valid file too.
  safetensors::save(path, {});
  const safetensors::Contents nothing = safetensors::load(path);
  CHECK(nothing.tensors.empty());
  CHECK(nothing.metadata.empty());
  CHECK(read_bytes(path) == make_file("{}      ", 0));
}

TEST_CASE("safetensors: the bytes on disk follow the format", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "model.safetensors";
  const auto tensors = sample_tensors();
  safetensors::save(path, tensors, {{"format", "pt"}});
  const std::string bytes = read_bytes(path);

  // 8 bytes: the header length N, unsigned little-endian, spelled out byte by byte.
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (std::size_t i = 8; i-- > 0;) n = n * 256 + static_cast<unsigned char>(bytes[i]);
  CHECK(n % 8 == 0);  // padded, so the data is 8-byte aligned
  REQUIRE(bytes.size() >= 8 + n);
  const std::string header_text = bytes.substr(8, n);
  CHECK(header_text.front() == '{');
  CHECK(header_text.find_last_not_of(' ') == header_text.rfind('}'));  // then spaces only

  const Json header = parse_json(header_text, "header");
  CHECK(header.begin().key() == "__metadata__");
  CHECK(header.at("__metadata__").at("format") == "pt");
  CHECK(header.at("encoder.w").dump() ==
        R"({"dtype":"F32","shape":[3,4],"data_offsets":[0,48]})");
  CHECK(header.at("scale").dump() == R"({"dtype":"F64","shape":[],"data_offsets":[48,56]})");
  CHECK(header.at("ids").dump() == R"({"dtype":"I64","shape":[2,2],"data_offsets":[56,88]})");
  CHECK(header.at("empty").dump() == R"({"dtype":"F32","shape":[0],"data_offsets":[88,88]})");
  CHECK(header.at("decoder.b").dump() ==
        R"({"dtype":"F64","shape":[2,1,3],"data_offsets":[88,136]})");

  // The data section: the tensors' raw bytes, back to back, and nothing more.
  std::string data;
  for (const auto& [name, t] : tensors) {
    if (t.nbytes() > 0) data.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  }
  CHECK(bytes.size() == 8 + n + 136);
  CHECK(bytes.substr(8 + n) == data);
}

TEST_CASE("safetensors: a truncated file always gives an Error naming the file",
          "[safetensors][errors]") {
  TempDir dir;
  const std::string good = dir / "good.safetensors";
  safetensors::save(good, sample_tensors(), {{"step", "3"}});
  const std::string bytes = read_bytes(good);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);

  const std::string cut = dir / "cut.safetensors";
  const std::size_t at[] = {0,     1,         7,     8,         9,
                            8 + n / 2, 8 + n - 1, 8 + n, 8 + n + 1, bytes.size() - 1};
  for (const std::size_t size : at) {
    CAPTURE(size);
    write_bytes(cut, bytes.substr(0, size));
    CHECK_THAT(load_error(cut), Contains(cut));
  }
  CHECK_THAT(load_error(cut), Contains("tensor 'decoder.b' claims bytes [88, 136) but the data "
                                       "section has only 135 bytes (the file is truncated"));
  write_bytes(cut, bytes.substr(0, 5));
  CHECK_THAT(load_error(cut), Equals(cut + ": the file is 5 bytes, too short for the 8-byte header "
                                     "length (the file is truncated or not a safetensors file)"));
  write_bytes(cut, bytes.substr(0, 8 + n - 1));
  CHECK_THAT(load_error(cut),
             Contains("header length says " + std::to_string(n) + " bytes but only "));
}

TEST_CASE("safetensors: every flipped header byte gives an Error or a valid file, never a crash",
          "[safetensors][errors]") {
  TempDir dir;
  const std::string good = dir / "good.safetensors";
  safetensors::save(good, sample_tensors(), {{"step", "3"}});
  const std::string bytes = read_bytes(good);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);

  const std::string bad = dir / "flipped.safetensors";
  int errors = 0;
  for (std::size_t i = 0; i < 8 + n; ++i) {
    for (const unsigned char mask : {0x01, 0x80}) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(static_cast<unsigned char>(flipped[i]) ^ mask);
      write_bytes(bad, flipped);
      const std::string error = load_error(bad);  // a crash or another exception fails here
      if (!error.empty()) {
        ++errors;
        CHECK_THAT(error, Contains(bad));
      }
    }
  }
  // Most flips break the file; a few only rename a tensor or change a metadata value.
  CHECK(errors > static_cast<int>(n));

  // The first '{' of the header, a digit of a shape, a digit of an offset:
  std::string flipped = bytes;
  flipped[8] = '[';
  write_bytes(bad, flipped);
  CHECK_THAT(load_error(bad), Contains(bad + ":1:"));  // a JSON error with line:column
  flipped = bytes;
  flipped[bytes.find("[3,4]")+ 1] = '5';
  write_bytes(bad, flipped);
  CHECK_THAT(load_error(bad), Contains("tensor 'encoder.w' has shape [5,4] and dtype F32, which "
                                       "take 80 bytes, but its data_offsets [0, 48) hold 48"));
  flipped = bytes;
  flipped[bytes.find("[48,56]") + 2] = '9';
  write_bytes(bad, flipped);
  CHECK_THAT(load_error(bad), Contains("tensor 'scale' has shape [] and dtype F64, which take 8 "
                                       "bytes, but its data_offsets [49, 56) hold 7"));
}

TEST_CASE("safetensors: load checks every field of the header", "[safetensors][errors]") {
  TempDir dir;
  const std::string path = dir / "bad.safetensors";
  // Writes a file with this header and data size, and returns load's error ("" if none).
  const auto error_for = [&](const std::string& header, std::size_t data_bytes) {
    write_bytes(path, make_file(header, data_bytes));
    return load_error(path);
  };
  const auto tensor = [](const std::string& fields) { return R"({"w": {)" + fields + "}}"; };
  const std::string dtype = R"("dtype": "F32", )";
  const std::string shape = R"("shape": [2, 2], )";

  // The example of the documentation: a header claiming more data than the file has.
  CHECK_THAT(error_for(tensor(R"("dtype": "F32", "shape": [1024], "data_offsets": [0, 4096])"),
                       1024),
             Equals(path + ": tensor 'w' claims bytes [0, 4096) but the data section has only "
                           "1024 bytes (the file is truncated or corrupt)"));
  // A well-formed header for comparison.
  CHECK(error_for(tensor(dtype + shape + R"("data_offsets": [0, 16])"), 16).empty());

  CHECK_THAT(error_for("[]", 0), Contains("the header is an array, not a JSON object"));
  CHECK_THAT(error_for("{\"w\": 1,}", 0), Contains(path + ":1:9: syntax error while parsing object key - unexpected '}'; expected string literal"));
  CHECK_THAT(error_for("", 0), Contains(path + ":1:1: syntax error while parsing value - unexpected end of input"));
  CHECK_THAT(error_for(R"({"w": [1]})", 0), Contains("tensor 'w': expected an object"));
  CHECK_THAT(error_for(tensor(R"("shape": [], "data_offsets": [0, 4])"), 4),
             Contains("tensor 'w' has no 'dtype'"));
  CHECK_THAT(error_for(tensor(dtype + shape + R"("data_offsets": [0, 16], "x": 1)"), 16),
             Contains("tensor 'w' has an unknown field 'x'"));
  CHECK_THAT(error_for(tensor(R"("dtype": "F16", )" + shape + R"("data_offsets": [0, 8])"), 8),
             Contains("tensor 'w' has dtype 'F16', which qkgrad does not read"));
  CHECK_THAT(error_for(tensor(R"("dtype": 32, )" + shape + R"("data_offsets": [0, 16])"), 16),
             Contains("dtype must be a string, got a number"));
  CHECK_THAT(error_for(tensor(dtype + R"("shape": 4, "data_offsets": [0, 16])"), 16),
             Contains("shape must be an array of sizes, got a number"));
  CHECK_THAT(error_for(tensor(dtype + R"("shape": [2, -2], "data_offsets": [0, 16])"), 16),
             Contains("tensor 'w': shape must hold non-negative integers, got -2"));
  CHECK_THAT(error_for(tensor(dtype + R"("shape": [2, 2.0], "data_offsets": [0, 16])"), 16),
             Contains("shape must hold non-negative integers, got 2.0 (not an integer literal"));
  CHECK_THAT(error_for(tensor(dtype + R"("shape": ["2"], "data_offsets": [0, 8])"), 8),
             Contains("got \"2\""));
  CHECK_THAT(error_for(tensor(dtype + R"("shape": [1,1,1,1,1,1], "data_offsets": [0, 4])"), 4),
             Contains("has rank 6; qkgrad tensors have at most 5 dimensions"));
  CHECK_THAT(error_for(tensor(dtype + R"("shape": [2147483648, 2147483648, 2147483648], )" +
                              R"("data_offsets": [0, 4])"), 4),
             Contains("more than 2^60 elements"));
  // No elements, but strides that overflow (found by fuzz-safetensors: UB in Shape::strides).
  CHECK_THAT(error_for(tensor(dtype + R"("shape": [0, 1099511627776, 1099511627776], )" +
                              R"("data_offsets": [0, 0])"), 0),
             Contains("whose non-zero sizes multiply to more than 2^60"));
  CHECK_THAT(error_for(tensor(dtype + shape + R"("data_offsets": [0])"), 16),
             Contains("data_offsets must be an array [begin, end], got [0]"));
  CHECK_THAT(error_for(tensor(dtype + shape + R"("data_offsets": "0,16")"), 16),
             Contains("data_offsets must be an array [begin, end], got a string"));
  CHECK_THAT(error_for(tensor(dtype + shape + R"("data_offsets": [16, 0])"), 16),
             Contains("data_offsets [16, 0] with begin after end"));
  CHECK_THAT(error_for(tensor(dtype + shape + R"("data_offsets": [0, 18446744073709551615])"), 16),
             Contains("data_offsets must hold non-negative integers, got "
                      "18446744073709551615 (not an integer literal that fits in 64 bits)"));
  CHECK_THAT(error_for(tensor(dtype + shape + R"("data_offsets": [0, 12])"), 12),
             Contains("take 16 bytes, but its data_offsets [0, 12) hold 12"));
  CHECK_THAT(error_for(tensor(dtype + shape + R"("data_offsets": [0, 16])"), 20),
             Contains("the data section has 20 bytes but the tensors cover only 16"));

  // Ranges: overlaps, holes and duplicates.
  // An F32 entry of n elements at [begin, end).
  const auto f32 = [](const std::string& name, int n, int begin, int end) {
    return "\"" + name + R"(": {"dtype": "F32", "shape": [)" + std::to_string(n) +
           R"(], "data_offsets": [)" + std::to_string(begin) + ", " + std::to_string(end) + "]}";
  };
  const std::string a = f32("a", 2, 0, 8);
  CHECK_THAT(error_for("{" + a + ", " + f32("b", 2, 4, 12) + "}", 12),
             Contains("tensor 'b' bytes [4, 12) overlap tensor 'a' bytes [0, 8)"));
  CHECK_THAT(error_for("{" + a + ", " + f32("b", 2, 12, 20) + "}", 20),
             Contains("bytes [8, 12) of the data section belong to no tensor"));
  CHECK_THAT(error_for("{" + a + ", " + f32("b", 0, 4, 4) + "}", 8),
             Contains("tensor 'b' bytes [4, 4) overlap tensor 'a'"));
  CHECK_THAT(error_for("{" + a + ", " + a + "}", 8), Contains("duplicate key 'a'"));
  // Out of order in the header is fine: the data order is what counts.
  CHECK(error_for("{" + f32("b", 1, 8, 12) + ", " + a + "}", 12).empty());
  CHECK(safetensors::load(path).tensors[0].first == "a");

  // Metadata: an object of strings.
  CHECK_THAT(error_for(R"({"__metadata__": {"step": 3}})", 0),
             Contains("__metadata__ value 'step' must be a string, got a number"));
  CHECK_THAT(error_for(R"({"__metadata__": ["x"]})", 0),
             Contains("__metadata__ must be an object of strings, got an array"));

  // A header length over the 100 MB limit (in a sparse file, so the test stays small).
  write_bytes(path, make_file("", 0));
  const uint64_t n = 150'000'000;
  {
    std::FILE* f = std::fopen(path.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fwrite(&n, 1, 8, f);
    std::fclose(f);
  }
  std::filesystem::resize_file(path, 200'000'000);
  CHECK_THAT(load_error(path), Contains("the header length 150000000 is over the limit of "
                                        "100000000 bytes"));
}

TEST_CASE("safetensors: parse() reads bytes in memory exactly as load() reads the file",
          "[safetensors][errors]") {
  TempDir dir;
  const std::string good = dir / "good.safetensors";
  safetensors::save(good, sample_tensors(), {{"step", "3"}});
  const std::string bytes = read_bytes(good);
  const safetensors::Contents parsed = safetensors::parse(bytes, good);
  const safetensors::Contents loaded = safetensors::load(good);
  CHECK(parsed.metadata == loaded.metadata);
  REQUIRE(parsed.tensors.size() == loaded.tensors.size());
  for (std::size_t i = 0; i < parsed.tensors.size(); ++i) {
    CHECK(parsed.tensors[i].first == loaded.tensors[i].first);
    CHECK(same_bytes(parsed.tensors[i].second, loaded.tensors[i].second));
  }

  // Every truncation gives the same Error, word for word.
  const std::string cut = dir / "cut.safetensors";
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    CAPTURE(size);
    write_bytes(cut, bytes.substr(0, size));
    std::string parse_error;
    try {
      safetensors::parse(std::string_view(bytes).substr(0, size), cut);
    } catch (const Error& e) {
      parse_error = e.what();
    }
    CHECK(!parse_error.empty());
    CHECK(parse_error == load_error(cut));
  }
}

TEST_CASE("safetensors: the fuzzer's seed files parse", "[safetensors]") {
  // fuzz/corpus/safetensors holds small valid files (written by save()) for fuzz-safetensors to
  // start from; a seed that no longer parses would make the fuzzer start from errors only.
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::string(QKGRAD_SOURCE_DIR) + "/fuzz/corpus/safetensors")) {
    CAPTURE(entry.path().string());
    CHECK_NOTHROW(safetensors::parse(read_bytes(entry.path().string()), entry.path().string()));
    ++seeds;
  }
  CHECK(seeds >= 5);
}

TEST_CASE("safetensors: missing files, bad paths and bad arguments", "[safetensors][errors]") {
  TempDir dir;
  const std::string missing = dir / "missing.safetensors";
  CHECK_THAT(load_error(missing), Contains("cannot open '" + missing + "': No such file"));
  CHECK_THAT(load_error(dir.path), Contains(dir.path + ": not a regular file"));

  const std::string nowhere = dir / "no/such/dir/model.safetensors";
  CHECK_THROWS_WITH(safetensors::save(nowhere, sample_tensors()),
                    Contains("cannot create the temporary file '" + nowhere + ".tmp.") &&
                        Contains("No such file or directory; check that the directory '" +
                                 (dir / "no/such/dir") + "' exists"));

  const std::string path = dir / "model.safetensors";
  const Tensor t = Tensor::ones({2});
  CHECK_THROWS_WITH(safetensors::save(path, {{"a", t}, {"a", t}}),
                    Contains("the name 'a' is used twice"));
  CHECK_THROWS_WITH(safetensors::save(path, {{"", t}}), Contains("must be non-empty"));
  CHECK_THROWS_WITH(safetensors::save(path, {{"__metadata__", t}}), Contains("must be non-empty"));
  CHECK_THROWS_WITH(safetensors::save(path, {{"a", Tensor()}}), Contains("'a' is undefined"));
  CHECK(count_files(dir) == 0);  // nothing was written
}

TEST_CASE("write_file_atomically: a failed write leaves the old file intact", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "checkpoint.safetensors";
  safetensors::save(path, sample_tensors());
  const std::string before = read_bytes(path);

  // The writer throws half-way through: its exception comes through, the old file stays.
  CHECK_THROWS_WITH(write_file_atomically(path,
                                          [](std::FILE* f) {
                                            std::fputs("half a checkpoint", f);
                                            fail("boom");
                                          }),
                    Equals("boom"));
  CHECK(read_bytes(path) == before);
  CHECK(count_files(dir) == 1);  // the temporary file is gone

  // A save that fails on its arguments does not touch the file either.
  CHECK_THROWS_AS(safetensors::save(path, {{"", Tensor::ones({1})}}), Error);
  CHECK(read_bytes(path) == before);

  // A write that fails in the file system (the file-size limit makes fwrite fail with EFBIG,
  // as a full disk would with ENOSPC). The limit is lifted before anything else is written.
  struct rlimit old_limit {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  std::string message;
  if (::setrlimit(RLIMIT_FSIZE, &small) == 0) {
    try {
      write_file_atomically(path, [](std::FILE* f) {
        const std::string block(1 << 16, 'x');
        std::fwrite(block.data(), 1, block.size(), f);  // unchecked: the function checks
      });
    } catch (const Error& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
    CHECK_THAT(message, Contains("write_file_atomically: writing '" + path +
                                 "' failed: File too large; free some disk space") &&
                            Contains("the previous file (if any) is unchanged"));
    CHECK(read_bytes(path) == before);
    CHECK(count_files(dir) == 1);
  } else {
    std::signal(SIGXFSZ, old_handler);
    WARN("setrlimit(RLIMIT_FSIZE) refused; the write-error case was skipped");
  }

  // A successful write replaces the file.
  write_file_atomically(path, [](std::FILE* f) { std::fputs("new", f); });
  CHECK(read_bytes(path) == "new");
  CHECK(count_files(dir) == 1);
}

TEST_CASE("read_file: contents, size limit and missing files", "[safetensors]") {
  TempDir dir;
  const std::string path = dir / "config.json";
  write_bytes(path, "{\"d_model\": 512}");
  CHECK(read_file(path, 100) == "{\"d_model\": 512}");
  CHECK_THAT(read_file(path, 16), Equals("{\"d_model\": 512}"));
  CHECK_THROWS_WITH(read_file(path, 15), Contains("'" + path + "' is 16 bytes, more than the "
                                                  "limit of 15 bytes"));
  CHECK_THROWS_WITH(read_file((dir / "nope.json"), 100),
                    Contains("cannot open '" + (dir / "nope.json") + "': No such file"));
  CHECK_THROWS_WITH(read_file(dir.path, 100), Contains("is not a regular file"));
  write_bytes(path, "");
  CHECK(read_file(path, 0).empty());
}

TEST_CASE("safetensors: CUDA tensors are saved from the device", "[safetensors][cuda]") {
  if (!cuda_available()) {
    WARN("CUDA part skipped: " << cuda_info().summary);
    return;
  }
  TempDir dir;
  const std::string path = dir / "gpu.safetensors";
  const auto host = sample_tensors();
  std::vector<std::pair<std::string, Tensor>> on_gpu;
  for (const auto& [name, t] : host) on_gpu.emplace_back(name, t.detach().to(Device::cuda));
  on_gpu[0].second.requires_grad_();  // a parameter on the GPU
  safetensors::save(path, on_gpu);
  const auto loaded = safetensors::load(path);
  REQUIRE(loaded.tensors.size() == host.size());
  for (std::size_t i = 0; i < host.size(); ++i) {
    CHECK(same_bytes(loaded.tensors[i].second, host[i].second));
  }
}
