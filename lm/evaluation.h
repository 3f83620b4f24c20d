// How well a language model predicts a text: the mean loss per byte over its windows
// (lm/text_data.h), the perplexity (per byte: the model's tokens are bytes) and bits per byte
// (the loss in bits: the number a compressor would be compared on).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lm/text_data.h"
#include "nn/language_model.h"

namespace qkgrad::lm {

struct TextScore {
  double loss_sum = 0;  // nats, summed over the predicted bytes
  int64_t bytes = 0;    // bytes predicted

  double loss() const;           // nats per byte
  double perplexity() const;     // exp(loss)
  double bits_per_byte() const;  // loss / ln 2
  std::string line() const;      // "loss 1.234, perplexity 3.43, 1.780 bits per byte on N bytes"
};

// The model (in eval mode for the call) on `windows` of `text`, `batch_size` windows a batch;
// `shown(done, total)` after each batch.
TextScore score_text(LanguageModel& model, const Windows& text, const std::vector<int64_t>& windows, int64_t batch_size,
                     const std::function<void(int64_t, int64_t)>& shown = {});

}  // namespace qkgrad::lm
