#include "training/data_parallel.h"

#include <errno.h>  // program_invocation_short_name (glibc)

#include <algorithm>
#include <cstdio>
#include <thread>

namespace qkgrad::training {

void require_same_as_root(distributed::Communicator& comm, const Json& mine, const std::string& what) {
  if (comm.size() == 1) return;
  std::string root_text = mine.dump();
  comm.broadcast(root_text, 0);
  const Json root = Json::parse(root_text);
  std::string differences;
  for (const auto& item : mine.items()) {
    const std::string theirs = root.contains(item.key()) ? root.at(item.key()).dump() : "(not set)";
    if (theirs == item.value().dump()) continue;
    differences += cat(differences.empty() ? "" : ", ", item.key(), " ", item.value().dump(), " (rank 0: ", theirs, ")");
  }
  for (const auto& item : root.items()) {
    if (!mine.contains(item.key())) differences += cat(differences.empty() ? "" : ", ", item.key(), " (not set; rank 0: ", item.value().dump(), ")");
  }
  if (!differences.empty()) {
    std::fprintf(stderr, "%s train (rank %d of %d): its %s differ from rank 0's: %s\n", program_invocation_short_name,
                 comm.rank(), comm.size(),
                 what.c_str(), differences.c_str());
    std::fflush(stderr);
  }
  std::vector<double> differing{differences.empty() ? 0.0 : 1.0};
  comm.sum(differing);
  if (differing[0] == 0) return;
  throw JobWideError(cat("the ", comm.size(), " ranks of this job were started with different ", what, " (", differing[0],
                         differing[0] == 1 ? " rank differs" : " ranks differ", " from rank 0, named above): every rank must run "
                         "the same command on the same data. Nothing was started or changed"));
}

uint64_t fingerprint(const std::vector<std::string>& lines, uint64_t hash) {
  for (const std::string& line : lines) hash = fnv1a("\n", fnv1a(line, hash));
  return hash;
}

std::vector<std::vector<int64_t>> split_shares(const std::vector<int64_t>& indices, int64_t parts) {
  QKGRAD_CHECK(parts >= 1, "split_shares: parts must be >= 1, got ", parts);
  const auto n = static_cast<int64_t>(indices.size());
  std::vector<std::vector<int64_t>> shares(parts);
  for (int64_t k = 0; k < parts; ++k) {
    const int64_t begin = k * n / parts, end = (k + 1) * n / parts;
    shares[k].assign(indices.begin() + begin, indices.begin() + end);
  }
  return shares;
}

std::vector<std::vector<int64_t>> rank_shares(const std::vector<int64_t>& indices, int rank, int ranks, int64_t accumulate) {
  std::vector<std::vector<int64_t>> all = split_shares(indices, ranks * accumulate);
  return {all.begin() + rank * accumulate, all.begin() + (rank + 1) * accumulate};
}

int threads_per_rank(int local_ranks) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_ranks));
}

}  // namespace qkgrad::training
