// Greedy decoding with the encode-once / decode-step interface: the shortest decoder that shows
// the interface, and the reference the translation program's beam search is tested against
// (beam 1 must give the same tokens; tests/test_translate.cpp). Programs decode with that beam
// search (translation/beam_search.h).
#pragma once

#include <vector>

#include "nn/transformer.h"

namespace qkgrad {

// For each row of src [B, S] (on the model's device): the most likely token at every step,
// starting from bos, until eos (not included) or max_len tokens. Runs under NoGradGuard; put the
// model in eval mode first.
std::vector<std::vector<int64_t>> greedy_decode(Seq2SeqTransformer& model, const Tensor& src,
                                                const std::vector<int64_t>& src_lengths, int64_t max_len);

}  // namespace qkgrad
