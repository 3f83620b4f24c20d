// Data-parallel training (docs/distributed.md), the parts that belong to the training harness:
// what the ranks of a job must agree on before they train, and which micro-batches of each
// global batch are this rank's. The communicators and the gradient reducer are distributed/.
//
// The global batch is the one a single process takes from the seed. Its pairs are split into
// ranks × K shares of consecutive pairs (split_shares; K = --accumulate), and rank r runs shares
// r·K ... r·K + K - 1 as its micro-batches: 2 ranks and one process with --accumulate 2 run the
// same micro-batches, and only the order in which their gradients are added differs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/hash.h"
#include "distributed/communicator.h"
#include "io/json.h"

namespace qkgrad::training {

// An error every rank of the job throws at the same point (the agreement checks below): the
// ranks end normally, without aborting the job.
class JobWideError : public Error {
 public:
  using Error::Error;
};

// Rank 0 sends `mine` (an object of flat values) to every rank. Each rank whose own differs
// prints its differences to stderr, naming the keys; then, if any rank differed, every rank
// throws JobWideError: "the ranks were started with different <what>" (nothing was started).
void require_same_as_root(distributed::Communicator& comm, const Json& mine, const std::string& what);

// The fingerprint of a corpus: FNV-1a (core/hash.h) over its lines, each followed by '\n',
// continuing from `hash`; compared across ranks.
uint64_t fingerprint(const std::vector<std::string>& lines, uint64_t hash = kFnv1aStart);

// A batch's examples split into `parts` shares of consecutive examples, as equal in size as
// they can be (share k is [k·n/parts, (k+1)·n/parts): sizes differ by at most one); a share is empty when there are fewer examples than
// parts. The micro-batches of --accumulate, and each rank's share of a global batch.
std::vector<std::vector<int64_t>> split_shares(const std::vector<int64_t>& indices, int64_t parts);

// This rank's micro-batches of a global batch (see above); some may be empty when the batch
// has fewer pairs than ranks × K.
std::vector<std::vector<int64_t>> rank_shares(const std::vector<int64_t>& indices, int rank, int ranks, int64_t accumulate);

// The OpenMP threads each rank uses when --threads is not given: the machine's cores shared out
// among the ranks on it (at least 1).
int threads_per_rank(int local_ranks);

}  // namespace qkgrad::training
