// The kernel interface's own parts: the names of the op enums, and the default of every kernel
// (a clear Error naming it), which a backend overrides with the kernels it has.
#include "core/backend.h"

#include "core/error.h"

namespace qkgrad {

const char* unary_op_name(UnaryOp op) {
  switch (op) {
#define QKGRAD_UNARY_NAME(name, functor, parameters, forward, backward) \
  case UnaryOp::name:                                                   \
    return #name;
    QKGRAD_UNARY_OPS(QKGRAD_UNARY_NAME)
#undef QKGRAD_UNARY_NAME
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
  }
  return "?";
}

void Backend::not_implemented(const char* kernel) const {
  fail(cat("backend ", device_name(device()), ": kernel '", kernel,
           "' is not implemented by this backend; run this op on the cpu"));
}

void check_gemm_bias(const GemmSpec& g, const Tensor& c) {
  QKGRAD_CHECK(g.bias && g.batch == 1 && g.beta == 0 && g.alpha == 1 && g.bias->shape() == Shape{g.n} &&
                   g.bias->dtype() == c.dtype(),
               "gemm: a bias needs batch 1, alpha 1, beta 0 and a [", g.n, "] vector of C's dtype, got ",
               g.bias ? describe(*g.bias) : std::string("none"));
}

void Backend::gemm_bias_in_c(const GemmSpec& g, const Tensor& a, const Tensor& b, Tensor& c) {
  check_gemm_bias(g, c);
  broadcast_to(*g.bias, c);
  GemmSpec plain = g;
  plain.bias = nullptr;
  plain.beta = 1.0;
  gemm(plain, a, b, c);
}

void Backend::fill(Tensor&, double) { not_implemented("fill"); }
void Backend::copy(const Tensor&, Tensor&) { not_implemented("copy"); }
void Backend::fill_uniform(Tensor&, double, double, RandomStream) { not_implemented("fill_uniform"); }
void Backend::fill_normal(Tensor&, double, double, RandomStream) { not_implemented("fill_normal"); }
void Backend::unary(UnaryOp, UnaryParams, const Tensor&, Tensor&) { not_implemented("unary"); }
void Backend::unary_backward(UnaryOp, UnaryParams, const Tensor*, const Tensor*, const Tensor&,
                             Tensor&, bool) {
  not_implemented("unary_backward");
}
void Backend::where(const Tensor&, const Tensor&, const Tensor&, Tensor&) { not_implemented("where"); }
void Backend::rope(const Tensor&, const Tensor&, const Tensor&, int64_t, Tensor&) { not_implemented("rope"); }
void Backend::binary(BinaryOp, const Tensor&, const Tensor&, Tensor&) { not_implemented("binary"); }
void Backend::broadcast_to(const Tensor&, Tensor&) { not_implemented("broadcast_to"); }
void Backend::scale(const Tensor&, double, Tensor&) { not_implemented("scale"); }
void Backend::axpy(double, const Tensor&, Tensor&) { not_implemented("axpy"); }
void Backend::sum_axis(const Tensor&, int64_t, int64_t, int64_t, Tensor&) { not_implemented("sum_axis"); }
void Backend::sum_all(const Tensor&, Tensor&) { not_implemented("sum_all"); }
double Backend::sum_of_squares(const std::vector<Tensor>&) { not_implemented("sum_of_squares"); }
void Backend::reduce_axis(ReduceOp, const Tensor&, int64_t, int64_t, int64_t, Tensor&) {
  not_implemented("reduce_axis");
}
void Backend::max_axis_backward(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, Tensor&) {
  not_implemented("max_axis_backward");
}
void Backend::gemm(const GemmSpec&, const Tensor&, const Tensor&, Tensor&) { not_implemented("gemm"); }
std::string Backend::bf16_products_missing() const {
  return cat("the ", device_name(device()), " backend has no bf16 products");
}
void Backend::softmax(const Tensor&, Tensor&, bool) { not_implemented("softmax"); }
void Backend::softmax_backward(const Tensor&, const Tensor&, Tensor&, bool) { not_implemented("softmax_backward"); }
void Backend::layer_norm(const Tensor&, const Tensor&, const Tensor&, double, Tensor&, Tensor&, Tensor&) {
  not_implemented("layer_norm");
}
void Backend::layer_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                  Tensor*, Tensor*, Tensor*) {
  not_implemented("layer_norm_backward");
}
void Backend::rms_norm(const Tensor&, const Tensor&, double, Tensor&, Tensor&) { not_implemented("rms_norm"); }
void Backend::rms_norm_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor*, Tensor*) {
  not_implemented("rms_norm_backward");
}
void Backend::l2_normalize(const Tensor&, double, Tensor&, Tensor&) { not_implemented("l2_normalize"); }
void Backend::l2_normalize_backward(const Tensor&, const Tensor&, double, const Tensor&, Tensor&) {
  not_implemented("l2_normalize_backward");
}
void Backend::cross_entropy(const Tensor&, const Tensor&, double, int64_t, Tensor&, Tensor&) {
  not_implemented("cross_entropy");
}
void Backend::cross_entropy_backward(const Tensor&, const Tensor&, const Tensor&, double, int64_t,
                                     const Tensor&, Tensor&) {
  not_implemented("cross_entropy_backward");
}
void Backend::dropout(const Tensor&, double, RandomStream, Tensor&, Tensor&) { not_implemented("dropout"); }
void Backend::dropout_backward(const Tensor&, const Tensor&, double, Tensor&) { not_implemented("dropout_backward"); }
void Backend::word_dropout(const Tensor&, double, int64_t, RandomStream, Tensor&) {
  not_implemented("word_dropout");
}
AttentionState Backend::attention_state(const AttentionSpec&, DType, bool) {
  not_implemented("attention_state");
  return {};
}
void Backend::attention_forward(const AttentionSpec&, const Tensor&, const Tensor&, const Tensor&, const Tensor*,
                                Tensor&, AttentionState&) {
  not_implemented("attention_forward");
}
void Backend::attention_backward(const AttentionSpec&, const Tensor&, const Tensor&, const Tensor&, const Tensor*,
                                 const Tensor&, const AttentionState&, const Tensor&, AttentionGrads&) {
  not_implemented("attention_backward");
}
void Backend::permute(const Tensor&, const std::vector<int>&, Tensor&) { not_implemented("permute"); }
void Backend::copy_block(const Tensor&, int64_t, int64_t, Tensor&, int64_t, int64_t, int64_t, int64_t,
                         int64_t, bool) {
  not_implemented("copy_block");
}
void Backend::index_select(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, Tensor&) {
  not_implemented("index_select");
}
void Backend::index_select_prefix(const Tensor&, const Tensor&, int64_t, Tensor&) {
  not_implemented("index_select_prefix");
}
void Backend::index_add(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, Tensor&) {
  not_implemented("index_add");
}
void Backend::gather(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t, Tensor&) {
  not_implemented("gather");
}
void Backend::scatter_add(const Tensor&, const Tensor&, int64_t, int64_t, int64_t, int64_t, Tensor&) {
  not_implemented("scatter_add");
}
void Backend::adam_update(Tensor&, const Tensor&, Tensor&, Tensor&, const AdamStep&) {
  not_implemented("adam_update");
}
void Backend::sgd_update(Tensor&, const Tensor&, Tensor&, const SgdStep&) {
  not_implemented("sgd_update");
}

}  // namespace qkgrad
