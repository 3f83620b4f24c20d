// Attention entropy and saturation per module (see attention_stats.h).
#include "translation/attention_stats.h"

#include <algorithm>
#include <cmath>

#include "core/autograd.h"
#include "core/error.h"
#include "io/json.h"
#include "ops/ops.h"

namespace qkgrad::translation {

namespace {

struct Accumulator {
  int64_t rows = 0, norm_rows = 0, saturated = 0;
  double entropy = 0, norm_entropy = 0, max_prob = 0;

  // probs [B, H, Tq, Tk] (float32 or float64, on any device): rows i < query_lengths[b] count.
  void add(const Tensor& probs, const std::vector<int64_t>& query_lengths) {
    const Tensor host = probs.to(Device::cpu);  // read element by element below
    const Tensor p = host.dtype() == DType::f64 ? host : host.to(DType::f64);
    const double* data = p.data<double>();
    const int64_t B = p.size(0), H = p.size(1), Tq = p.size(2), Tk = p.size(3);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t i = 0; i < std::min(Tq, query_lengths[b]); ++i) {
          const double* row = data + ((b * H + h) * Tq + i) * Tk;  // [Tk]
          double e = 0, m = 0;
          int64_t visible = 0;  // keys with p > 0: padding and future positions have p = 0 exactly
          for (int64_t j = 0; j < Tk; ++j) {
            if (row[j] > 0) {
              e -= row[j] * std::log(row[j]);
              ++visible;
            }
            m = std::max(m, row[j]);
          }
          ++rows;
          entropy += e;
          max_prob += m;
          if (m >= 0.9) ++saturated;
          if (visible > 1) {
            norm_entropy += e / std::log(static_cast<double>(visible));
            ++norm_rows;
          }
        }
      }
    }
  }
};

struct Watched {
  std::string name;
  MultiHeadAttention* module;
  bool on_target;  // its queries are target positions (decoder) rather than source positions
};

}  // namespace

std::vector<ModuleAttentionStats> attention_statistics(Seq2SeqTransformer& model, const std::vector<Pair>& pairs,
                                                       int64_t batch_tokens) {
  QKGRAD_CHECK(!pairs.empty(), "attention statistics: no sentence pairs given");
  std::vector<Watched> watched;
  for (std::size_t l = 0; l < model.encoder_layers.size(); ++l)
    watched.push_back({cat("encoder.layers.", l, ".self_attn"), &model.encoder_layers[l]->self_attn, false});
  for (std::size_t l = 0; l < model.decoder_layers.size(); ++l) {
    watched.push_back({cat("decoder.layers.", l, ".self_attn"), &model.decoder_layers[l]->self_attn, true});
    watched.push_back({cat("decoder.layers.", l, ".cross_attn"), &model.decoder_layers[l]->cross_attn, true});
  }
  const bool was_training = model.training();
  model.eval();
  for (Watched& w : watched) w.module->record_probs = true;
  std::vector<Accumulator> acc(watched.size());
  const BatchPlan plan(pairs, batch_tokens);
  for (int64_t k = 0; k < plan.batches_per_epoch(); ++k) {
    const Batch b = make_batch(pairs, plan.group(k), model.device(), special_ids(model.config()));
    NoGradGuard no_grad;
    model.forward(b.src, b.src_lengths, b.tgt_in, b.tgt_lengths);  // teacher forcing
    for (std::size_t m = 0; m < watched.size(); ++m) {
      acc[m].add(watched[m].module->last_probs, watched[m].on_target ? b.tgt_lengths : b.src_lengths);
    }
  }
  for (Watched& w : watched) {
    w.module->record_probs = false;
    w.module->last_probs = Tensor();
  }
  model.train(was_training);

  std::vector<ModuleAttentionStats> stats;
  for (std::size_t m = 0; m < watched.size(); ++m) {
    const Accumulator& a = acc[m];
    ModuleAttentionStats s;
    s.module = watched[m].name;
    s.rows = a.rows;
    const double rows = static_cast<double>(std::max<int64_t>(a.rows, 1));
    s.mean_entropy = a.entropy / rows;
    s.mean_max_prob = a.max_prob / rows;
    s.saturated_fraction = static_cast<double>(a.saturated) / rows;
    s.mean_norm_entropy = a.norm_entropy / static_cast<double>(std::max<int64_t>(a.norm_rows, 1));
    const Tensor& g = watched[m].module->g;
    if (g.defined()) s.g = g.numel() == 1 ? g.to(DType::f64).item() : mean(g.to(DType::f64)).item();
    stats.push_back(s);
  }
  return stats;
}

std::string attention_statistics_jsonl(const std::vector<ModuleAttentionStats>& stats) {
  std::string out;
  for (const ModuleAttentionStats& s : stats) {
    const Json j = {{"module", s.module},
                    {"rows", s.rows},
                    {"mean_entropy", s.mean_entropy},
                    {"mean_norm_entropy", s.mean_norm_entropy},
                    {"mean_max_prob", s.mean_max_prob},
                    {"saturated_fraction", s.saturated_fraction},
                    {"g", s.g}};
    out += dump_json(j) + "\n";
  }
  return out;
}

}  // namespace qkgrad::translation
