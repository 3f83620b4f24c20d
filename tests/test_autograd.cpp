// The tape: recording, reverse accumulation with +=, the no-grad guard, clearing, and clear
// errors for every misuse.
#include <catch2/catch.hpp>

#include <thread>

#include "core/autograd.h"
#include "core/error.h"
#include "ops/ops.h"

using namespace qkgrad;
using Catch::Matchers::Contains;

namespace {
Tensor leaf(std::vector<double> values, Shape shape) {
  Tensor t = Tensor::from_vector(values, shape, DType::f64);
  t.requires_grad_();
  return t;
}
}  // namespace

TEST_CASE("backward of y = sum(a * b + a) gives b + 1 and a", "[autograd]") {
  Tensor a = leaf({1, 2, 3}, {3});
  Tensor b = leaf({4, 5, 6}, {3});
  const Tensor y = sum(a * b + a);
  CHECK(y.item() == 4 + 10 + 18 + 6);
  CHECK(tape().size() == 3);  // mul, add, sum
  y.backward();
  CHECK(a.grad().to_vector() == std::vector<double>{5, 6, 7});
  CHECK(b.grad().to_vector() == std::vector<double>{1, 2, 3});
  CHECK(tape().size() == 0);  // the tape is consumed
}

TEST_CASE("gradients accumulate with += across backward calls until zeroed", "[autograd]") {
  Tensor x = leaf({2}, {1});
  sum(x * x).backward();
  CHECK(x.grad().item() == 4);
  sum(x * x).backward();
  CHECK(x.grad().item() == 8);
  x.zero_grad();
  CHECK(x.grad().item() == 0);
  sum(x * 3.0).backward();
  CHECK(x.grad().item() == 3);
  x.clear_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("a tensor used twice receives both gradients (no aliasing of gradient buffers)", "[autograd]") {
  Tensor x = leaf({1, 2}, {2});
  const Tensor y = x + x;  // dy/dx = 2, both contributions arrive from one node
  sum(y).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{2, 2});
  Tensor a = leaf({1, 2}, {2});
  Tensor b = leaf({3, 4}, {2});
  sum(a + b).backward();  // both gradients come from the same dc: they must not share memory
  a.grad().set({0}, 100);
  CHECK(b.grad().at({0}) == 1);
}

TEST_CASE("NoGradGuard records nothing", "[autograd]") {
  Tensor x = leaf({1, 2}, {2});
  {
    NoGradGuard no_grad;
    const Tensor y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    CHECK(tape().size() == 0);
  }
  CHECK(grad_enabled());
  const Tensor z = x * 2.0;
  CHECK(z.requires_grad());
  CHECK(tape().size() == 1);
  tape().clear();
  CHECK(tape().size() == 0);
}

TEST_CASE("ops on tensors that do not require grad record nothing", "[autograd]") {
  const Tensor a = Tensor::ones({2});
  const Tensor y = exp(a) + a;
  CHECK_FALSE(y.requires_grad());
  CHECK(tape().size() == 0);
}

TEST_CASE("backward twice is a clear error", "[autograd][errors]") {
  Tensor x = leaf({1}, {1});
  const Tensor y = sum(x * x);
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Contains("backward(): called twice on the same tensor"));
}

TEST_CASE("backward of a non-scalar without a seed is a clear error", "[autograd][errors]") {
  Tensor x = leaf({1, 2}, {2});
  const Tensor y = x * 2.0;
  CHECK_THROWS_WITH(y.backward(), Contains("backward(): the tensor has shape [2]") &&
                                      Contains("call backward(seed)"));
  y.backward(Tensor::from_vector({1, 10}, {2}, DType::f64));  // with a seed it works
  CHECK(x.grad().to_vector() == std::vector<double>{2, 20});
  Tensor z = leaf({1}, {1});
  const Tensor w = z * 2.0;
  CHECK_THROWS_WITH(w.backward(Tensor::ones({2}, DType::f64)), Contains("seed gradient ([2] f64 cpu) must match the tensor ([1] f64 cpu)"));
  tape().clear();
}

TEST_CASE("grad of a tensor not on the tape is a clear error", "[autograd][errors]") {
  const Tensor plain = Tensor::ones({2, 3});
  CHECK_THROWS_WITH(plain.grad(), Contains("grad(): this tensor ([2, 3] f32 cpu) does not require grad and is not on the tape"));
  CHECK_THROWS_WITH(sum(plain).backward(), Contains("does not require grad"));
  Tensor x = leaf({1, 2}, {2});
  const Tensor mid = x * 3.0;
  sum(mid).backward();
  CHECK_THROWS_WITH(mid.grad(), Contains("intermediate result of op 'mul_scalar'") && Contains("retain_grad()"));
}

TEST_CASE("retain_grad keeps an intermediate gradient", "[autograd]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor mid = x * 3.0;
  mid.retain_grad();
  sum(mid * mid).backward();
  CHECK(mid.grad().to_vector() == std::vector<double>{6, 12});
  CHECK(x.grad().to_vector() == std::vector<double>{18, 36});
}

TEST_CASE("backward after the tape was cleared is a clear error", "[autograd][errors]") {
  Tensor x = leaf({1}, {1});
  const Tensor y = sum(x * x);
  tape().clear();
  CHECK_THROWS_WITH(y.backward(), Contains("was made by op 'sum' on a tape that was since cleared"));
}

TEST_CASE("modifying a saved tensor in place before backward is detected", "[autograd][errors]") {
  Tensor a = leaf({1, 2}, {2});
  Tensor b = Tensor::from_vector({3, 4}, {2}, DType::f64);  // saved by mul, no grad itself
  const Tensor y = sum(a * b);
  b.fill_(0);
  CHECK_THROWS_WITH(y.backward(), Contains("backward of op 'mul'") && Contains("modified in place"));
  CHECK(tape().size() == 0);  // a failed backward leaves a clean tape
}

TEST_CASE("a leaf's backward is its seed; branches that do not reach the loss are skipped", "[autograd]") {
  Tensor x = leaf({5}, {1});
  x.backward();
  CHECK(x.grad().item() == 1);
  Tensor y = leaf({1, 2}, {2});
  const Tensor unused = exp(y);  // recorded, but the loss does not depend on it
  sum(y * 2.0).backward();
  CHECK(y.grad().to_vector() == std::vector<double>{2, 2});
}

TEST_CASE("requires_grad_(false) on a non-leaf is refused; detach cuts the graph", "[autograd][errors]") {
  Tensor x = leaf({1}, {1});
  Tensor y = x * 2.0;
  CHECK_THROWS_WITH(y.requires_grad_(false), Contains("produced by op 'mul_scalar'") && Contains("detach()"));
  const Tensor d = y.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.raw_data() == y.raw_data());
  tape().clear();
}

TEST_CASE("using an intermediate from a consumed tape is a clear error, not a lost gradient", "[autograd][errors]") {
  Tensor x = leaf({1, 2, 3}, {3});
  const Tensor y = x * 2.0;
  sum(y * 3.0).backward();
  CHECK_THROWS_WITH(y * y, Contains("mul: input 0 ([3] f64 cpu) was produced by op 'mul_scalar' on a tape that backward() already consumed"));
  const Tensor z = y.detach() * x;  // as a constant it is fine
  x.clear_grad();
  sum(z).backward();
  CHECK(x.grad().to_vector() == std::vector<double>{2, 4, 6});
}

TEST_CASE("a tensor recorded on another thread's tape cannot be used on this one", "[autograd][errors]") {
  Tensor x = leaf({1, 2}, {2});
  Tensor from_other_thread;
  std::thread worker([&] { from_other_thread = x * 2.0; });
  worker.join();
  CHECK_THROWS_WITH(from_other_thread.backward(Tensor::ones({2}, DType::f64)), Contains("on a tape that was since cleared"));
  CHECK_THROWS_WITH(sum(from_other_thread), Contains("belongs to another thread"));
}

TEST_CASE("a backward that fails on a modified saved tensor leaves every gradient untouched", "[autograd][errors]") {
  Tensor a = leaf({1, 2}, {2});
  Tensor data = Tensor::from_vector({3, 4}, {2}, DType::f64);
  const Tensor loss = sum(a * data) + sum(a * 5.0);
  data.fill_(0);
  CHECK_THROWS_WITH(loss.backward(), Contains("modified in place"));
  CHECK_FALSE(a.grad().defined());
  // A dead branch that saved the tensor does not matter: its backward never runs.
  Tensor b = leaf({1, 2}, {2});
  Tensor c = Tensor::from_vector({3, 4}, {2}, DType::f64);
  const Tensor unused = b * c;
  const Tensor loss2 = sum(b * 2.0);
  c.fill_(0);
  loss2.backward();
  CHECK(b.grad().to_vector() == std::vector<double>{2, 2});
}
