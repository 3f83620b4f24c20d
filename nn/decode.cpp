#include "nn/decode.h"

#include "core/autograd.h"
#include "core/error.h"

namespace qkgrad {

std::vector<std::vector<int64_t>> greedy_decode(Seq2SeqTransformer& model, const Tensor& src,
                                                const std::vector<int64_t>& src_lengths, int64_t max_len) {
  QKGRAD_CHECK(max_len >= 1, "greedy_decode: max_len must be >= 1, got ", max_len);
  NoGradGuard no_grad;
  const TransformerConfig& c = model.config();
  const int64_t batch = src.size(0);
  auto state = model.start_decoding(model.encode(src, src_lengths), src_lengths, max_len);
  std::vector<std::vector<int64_t>> out(batch);
  std::vector<bool> done(batch, false);
  std::vector<int64_t> previous(batch, c.bos_id);
  for (int64_t step = 0; step < max_len; ++step) {
    // The previous tokens go to the model's device; the logits come back to the host.
    const Tensor tokens = Tensor::from_ids(previous, {batch}, model.device());
    const std::vector<double> logits = model.decode_step(state, tokens).to_vector();
    bool all_done = true;
    for (int64_t b = 0; b < batch; ++b) {
      const double* row = logits.data() + b * c.vocab;
      int64_t best = 0;
      for (int64_t v = 1; v < c.vocab; ++v) best = row[v] > row[best] ? v : best;
      previous[b] = best;
      if (done[b]) continue;
      if (best == c.eos_id) {
        done[b] = true;
      } else {
        out[b].push_back(best);
      }
      all_done = all_done && done[b];
    }
    if (all_done) break;
  }
  return out;
}

}  // namespace qkgrad
