// Turning encoded sentence pairs into training batches.
//
// Batches are length-bucketed: pairs are sorted by length and cut into consecutive runs whose
// padded size stays within a token budget, so a batch wastes little on padding and holds about
// the same number of tokens whatever the sentence lengths. The order of the batches is shuffled
// anew each epoch from (seed, epoch): the whole data order is a function of the seed, and a
// position in it is just (epoch, batch index) — which is what a checkpoint stores.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/transformer.h"

namespace qkgrad::translation {

struct Pair {
  std::vector<int64_t> src, tgt;  // subword ids, without bos/eos
};

struct Batch {
  Tensor src;                       // [B, S]: src ids + eos, padded with pad_id (i64)
  Tensor tgt_in;                    // [B, T]: bos + tgt ids
  Tensor tgt_out;                   // [B, T]: tgt ids + eos
  std::vector<int64_t> src_lengths, tgt_lengths;
  std::vector<int64_t> indices;     // which pairs, in order
  int64_t src_tokens = 0, tgt_tokens = 0;  // real (non-pad) tokens
};

// The ids a model was built with (its config's pad_id, bos_id, eos_id, unk_id): a batch for that
// model must use them, whatever the defaults (SpecialIds, nn/transformer.h).
SpecialIds special_ids(const TransformerConfig& config);

// Pads a group of pairs into one batch, whose id tensors are created on `device` (the model's).
Batch make_batch(const std::vector<Pair>& pairs, const std::vector<int64_t>& indices,
                 Device device = Device::cpu, SpecialIds ids = {});

// The order the pairs are sorted in before they are cut into batches (train --batch-sort):
//   target  by target length, then source length (Marian's default, --maxi-batch-sort trg;
//           fairseq sorts by source, then target): the targets of a batch are alike, its
//           sources are not;
//   longer  by the longer side in bins of 4 subwords, then by source length, then target length
//           (fairseq's --num-batch-buckets also sorts by the longer padded side): both sides
//           alike. On TED gl→en (the paper preset) 88% of the padded source and 92% of the
//           target are real tokens, against 64% and 99% by target.
enum class BatchSort { target, longer };
BatchSort batch_sort_named(const std::string& name);  // "target" or "longer"

class BatchPlan {
 public:
  // Groups pair indices into batches of at most max_tokens padded tokens (the larger of the
  // source and target sides, counting eos/bos); a pair longer than that gets a batch of its own.
  BatchPlan(const std::vector<Pair>& pairs, int64_t max_tokens, BatchSort sort = BatchSort::target);

  int64_t batches_per_epoch() const { return static_cast<int64_t>(groups_.size()); }
  // The batch order of an epoch: a permutation of 0..batches-1 from (seed, epoch).
  std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch) const;
  const std::vector<int64_t>& group(int64_t i) const { return groups_[static_cast<std::size_t>(i)]; }

 private:
  std::vector<std::vector<int64_t>> groups_;
};

// How much of an epoch's padded batches is real tokens, on each side (the eos and the bos counted
// as make_batch pads them). The encoder and the decoder compute on every padded position; sorted
// by target length (BatchSort::target), the source side pads the more.
struct PaddingFill {
  int64_t src_real = 0, src_padded = 0;  // source tokens in the pairs, and B·S summed over batches
  int64_t tgt_real = 0, tgt_padded = 0;  // the same on the target side (B·T)
};
PaddingFill padding_fill(const BatchPlan& plan, const std::vector<Pair>& pairs);

// The q-th percentile (0..100) of a list of lengths (nearest rank), e.g. L = the 97.5th
// percentile of the encoded training lengths sets QKNorm's initial gain.
double percentile(std::vector<int64_t> values, double q);

}  // namespace qkgrad::translation
