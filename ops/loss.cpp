// Losses: the fused label-smoothed cross-entropy over logits, and NLL over log-probabilities.
// Both return the summed loss over the non-ignored rows and how many rows that was, so a
// trainer can normalise by tokens however it likes (per batch, per sentence, ...).
#include <cmath>
#include <vector>

#include "core/autograd.h"
#include "core/backend.h"
#include "core/error.h"
#include "ops/ops.h"
#include "ops/validate.h"

namespace qkgrad {

namespace {

// Targets must have the logits' shape without the class dim; returns the non-ignored count.
int64_t check_targets(const char* op, const char* scores_name, const Tensor& scores, const Tensor& targets,
                      int64_t ignore_index) {
  check_floating(op, scores, scores_name);
  check_index_tensor(op, targets, "targets");
  QKGRAD_CHECK(scores.rank() >= 1, op, ": scores need a class dim, got shape ", scores.shape());
  const Shape expected(std::vector<int64_t>(scores.shape().begin(), scores.shape().end() - 1));
  QKGRAD_CHECK(targets.shape() == expected, op, ": targets ", targets.shape(), " must have shape ",
               expected, " (the scores ", scores.shape(), " without their class dim)");
  QKGRAD_CHECK(targets.device() == scores.device(), op, ": targets are on ",
               device_name(targets.device()), " but the scores are on ", device_name(scores.device()));
  const int64_t classes = scores.size(-1);
  const std::vector<int64_t> ids = targets.to_ids();
  int64_t count = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == ignore_index) continue;
    QKGRAD_CHECK(ids[i] >= 0 && ids[i] < classes, op, ": target ", ids[i], " at flat position ", i,
                 " is out of range [0, ", classes, ") and is not the ignore index ", ignore_index);
    ++count;
  }
  return count;
}

}  // namespace

namespace {

// z-loss (PaLM; Wortsman et al. 2023): λ·Σ over non-ignored rows of lse(z)², lse(z) = log Σ_c e^{z_c}
// (the log of the softmax's normaliser Z), from the cross-entropy kernel's lse [rows].
//   z̄ = ȳ · 2λ·lse(z)·softmax(z) = ȳ · 2λ·lse ⊙ exp(z − lse)      (0 for ignored rows)
// Composed of ops (one extra pass over the logits in the backward), one node on the tape.
Tensor z_loss_term(const Tensor& logits, const Tensor& lse, const Tensor& targets, double lambda, int64_t ignore_index) {
  std::vector<double> keep;
  for (const int64_t t : targets.to_ids()) keep.push_back(t == ignore_index ? 0.0 : 1.0);
  const Tensor kept_lse = lse * Tensor::from_vector(keep, lse.shape(), lse.dtype(), lse.device());  // [rows...]
  Tensor term;
  {
    NoGradGuard no_grad;
    term = sum(kept_lse * kept_lse) * lambda;  // []
  }
  if (should_record(logits)) {
    record("cross_entropy", {logits}, {term}, {logits, lse, kept_lse}, [lambda](BackwardContext& ctx) {
      const Tensor& z = ctx.saved(0);
      std::vector<int64_t> column = ctx.saved(1).shape().to_vector();
      column.push_back(1);  // [rows..., 1]: one value per row, broadcast over the classes
      const Tensor p = exp(z - ctx.saved(1).reshape(Shape(column)));
      ctx.accumulate(0, p * (ctx.saved(2).reshape(Shape(column)) * (2.0 * lambda)) * ctx.grad_output());
    });
  }
  return term;
}

}  // namespace

// With p = softmax(z) and q = (1 − ε)·onehot(t) + ε/V (ε = smoothing), per non-ignored row:
//   loss = −Σ_c q_c log p_c = lse(z) − (1 − ε) z_t − (ε/V) Σ_c z_c   (+ λ·lse(z)² with z-loss λ)
//   z̄ = ȳ · (p − q)          (+ ȳ · 2λ·lse(z)·p; 0 for ignored rows)
LossSum cross_entropy(const Tensor& logits, const Tensor& targets, double smoothing, int64_t ignore_index, double z_loss) {
  QKGRAD_CHECK(smoothing >= 0 && smoothing <= 1, "cross_entropy: smoothing must be in [0, 1], got ", smoothing);
  QKGRAD_CHECK(z_loss >= 0 && std::isfinite(z_loss), "cross_entropy: z_loss must be >= 0, got ", z_loss);
  const int64_t tokens = check_targets("cross_entropy", "logits", logits, targets, ignore_index);
  QKGRAD_CHECK(logits.size(-1) > 0, "cross_entropy: logits ", logits.shape(), " have no classes");
  Backend& be = backend(logits.device());
  Tensor row_loss = Tensor::empty(targets.shape(), logits.dtype(), logits.device());
  Tensor lse = Tensor::empty(targets.shape(), logits.dtype(), logits.device());
  be.cross_entropy(logits, targets, smoothing, ignore_index, row_loss, lse);
  Tensor total = Tensor::empty(Shape{}, logits.dtype(), logits.device());
  be.sum_all(row_loss, total);
  if (should_record(logits)) {
    record("cross_entropy", {logits}, {total}, {logits, lse, targets},
           [smoothing, ignore_index](BackwardContext& ctx) {
             const Tensor& z = ctx.saved(0);
             Tensor dz = Tensor::empty(z.shape(), z.dtype(), z.device());
             backend(z.device()).cross_entropy_backward(z, ctx.saved(1), ctx.saved(2), smoothing,
                                                        ignore_index, ctx.grad_output(), dz);
             ctx.accumulate(0, std::move(dz));
           });
  }
  if (z_loss > 0) total = total + z_loss_term(logits, lse, targets, z_loss, ignore_index);
  return {total, tokens};
}

// loss = −Σ over non-ignored rows of log_probs[row, t]   (composed: gather, where, sum)
//   log_probs̄[row, t] = −ȳ, 0 elsewhere
LossSum nll(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index) {
  const int64_t tokens = check_targets("nll", "log-probabilities", log_probs, targets, ignore_index);
  std::vector<int64_t> ids = targets.to_ids(), safe(ids.size());
  std::vector<double> keep(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    keep[i] = ids[i] == ignore_index ? 0.0 : 1.0;
    safe[i] = ids[i] == ignore_index ? 0 : ids[i];  // any valid index: its value is masked out
  }
  std::vector<int64_t> dims = targets.shape().to_vector();
  dims.push_back(1);
  const Shape column(dims);
  const Tensor picked = gather(log_probs, -1, Tensor::from_ids(safe, column, log_probs.device()));
  const Tensor mask = Tensor::from_vector(keep, column, log_probs.dtype(), log_probs.device());
  // `where`, not `picked * mask`: an ignored row may have −∞ at index 0, and −∞ · 0 = NaN.
  const Tensor zero = Tensor::scalar(0.0, log_probs.dtype(), log_probs.device());
  return {neg(sum(where(mask, picked, zero))), tokens};
}

}  // namespace qkgrad
