#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "ops/backend.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

Tensor scalar64(double value) { return Tensor::scalar(value, DType::f64); }

TEST(GradientTape, ChainRuleThroughSeveralOps) {
  const Tensor x = scalar64(3.0);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x * x + 2.0 * x;  // dy/dx = 3x^2 + 2 = 29
  const auto grads = tape.gradient(y, {x});
  EXPECT_DOUBLE_EQ(grads[0].item(), 29.0);
}

TEST(GradientTape, AccumulatesOverFanOut) {
  const Tensor x = Tensor::from_vector<double>({1, 2}, {2});
  GradientTape tape;
  tape.watch(x);
  const Tensor a = exp(x);
  const Tensor loss = sum(a * a + a);  // d/dx = 2 e^{2x} + e^x
  const auto grad = tape.gradient(loss, {x})[0].to_vector<double>();
  EXPECT_NEAR(grad[0], 2 * std::exp(2.0) + std::exp(1.0), 1e-12);
  EXPECT_NEAR(grad[1], 2 * std::exp(4.0) + std::exp(2.0), 1e-12);
}

TEST(GradientTape, VariablesAreWatchedAutomatically) {
  Tensor w = Tensor::from_vector<double>({2, -1}, {2});
  w.set_variable(true);
  const Tensor x = Tensor::from_vector<double>({3, 4}, {2});
  GradientTape tape;
  const Tensor loss = sum(w * x);
  const auto grads = tape.gradient(loss, {w, x});
  EXPECT_EQ(grads[0].to_vector<double>(), (std::vector<double>{3, 4}));
  EXPECT_FALSE(grads[1].defined());  // x was never watched
  GradientTape unwatching(false, /*watch_accessed_variables=*/false);
  const Tensor loss2 = sum(w * x);
  EXPECT_EQ(unwatching.recorded_ops(), 0u);
}

TEST(GradientTape, UnconnectedSourcesAreUndefinedOrZero) {
  const Tensor x = scalar64(1.0);
  const Tensor unrelated = Tensor::from_vector<double>({5, 6}, {2});
  GradientTape tape(true);
  tape.watch(x);
  tape.watch(unrelated);
  const Tensor y = x * 4.0;
  EXPECT_FALSE(tape.gradient(y, {unrelated})[0].defined());
  EXPECT_EQ(tape.gradient(y, {unrelated}, {}, true)[0].to_vector<double>(),
            (std::vector<double>{0, 0}));
}

TEST(GradientTape, NonPersistentTapeCanBeUsedOnce) {
  const Tensor x = scalar64(2.0);
  GradientTape tape;
  tape.watch(x);
  const Tensor y = x * x;
  tape.gradient(y, {x});
  EXPECT_THROW(tape.gradient(y, {x}), Error);
}

TEST(GradientTape, SecondOrderThroughNestedTapes) {
  const Tensor x = scalar64(1.5);
  GradientTape outer;
  outer.watch(x);
  Tensor first;
  {
    GradientTape inner;
    inner.watch(x);
    const Tensor y = x * x * x;  // y' = 3x^2, y'' = 6x
    first = inner.gradient(y, {x})[0];
  }
  EXPECT_DOUBLE_EQ(first.item(), 3 * 1.5 * 1.5);
  EXPECT_DOUBLE_EQ(outer.gradient(first, {x})[0].item(), 6 * 1.5);
}

TEST(GradientTape, OutputGradientSeedsTheReversePass) {
  const Tensor x = Tensor::from_vector<double>({1, 2, 3}, {3});
  GradientTape tape(/*persistent=*/true);
  tape.watch(x);
  const Tensor y = x * 2.0;
  const auto grad = tape.gradient(y, {x}, Tensor::from_vector<double>({1, 10, 100}, {3}));
  EXPECT_EQ(grad[0].to_vector<double>(), (std::vector<double>{2, 20, 200}));
  EXPECT_THROW(tape.gradient(y, {x}, Tensor::zeros({2}, DType::f64)), InvalidArgument);
}

TEST(GradientTape, NoGradGuardStopsRecording) {
  const Tensor x = scalar64(2.0);
  GradientTape tape;
  tape.watch(x);
  {
    NoGradGuard no_grad;
    const Tensor ignored = x * x;
  }
  EXPECT_EQ(tape.recorded_ops(), 0u);
  const Tensor y = x * x;
  EXPECT_EQ(tape.recorded_ops(), 1u);
}

TEST(GradientTape, IntegerAndBoolResultsAreNotRecorded) {
  const Tensor x = Tensor::from_vector<double>({1, 3, 2}, {3});
  GradientTape tape;
  tape.watch(x);
  const Tensor index = argmax(x);
  const Tensor mask = greater(x, scalar64(1.5));
  EXPECT_EQ(tape.recorded_ops(), 0u);
  EXPECT_THROW(tape.watch(index), InvalidArgument);
}

TEST(GradientTape, OpWithoutGradientRuleFailsClearly) {
  const Tensor x = Tensor::from_vector<double>({0.5, -0.3}, {2});
  GradientTape tape;
  tape.watch(x);
  const Tensor y = sum(gelu_backward(x, x));
  try {
    tape.gradient(y, {x});
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("gelu_backward"), std::string::npos);
  }
}

// The tape's op observer, installed for good by the first tape, watches this thread's ops only
// while a tape on this thread records (not under NoGradGuard): a compiled step replays its
// recorded kernels whenever no observer watches, so an idle recorder must not say it does.
TEST(GradientTape, ItsObserverWatchesOnlyWhileATapeHereRecords) {
  const auto watched = [] {
    const auto observers = current_op_observers();
    return std::ranges::any_of(
        *observers, [](const OpObserver* observer) { return observer->watches_this_thread(); });
  };
  {
    const GradientTape tape;
    EXPECT_TRUE(watched());
    const NoGradGuard paused;
    EXPECT_FALSE(watched());
  }
  EXPECT_FALSE(watched());
  const GradientTape tape;
  bool watched_elsewhere = true;
  std::thread([&] { watched_elsewhere = watched(); }).join();
  EXPECT_FALSE(watched_elsewhere);
}

}  // namespace
}  // namespace tandem
