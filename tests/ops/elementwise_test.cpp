#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::expect_gradients_match;
using testing::random_extent;
using testing::random_tensor;

Shape random_shape(int rank) {
  Shape shape;
  for (int i = 0; i < rank; ++i) shape.push_back(random_extent(1, 4));
  return shape;
}

TEST(Elementwise, HandDerivedValues) {
  const Tensor x = Tensor::from_vector<float>({-2, -0.5, 0, 1.5}, {4});
  expect_close(relu(x), Tensor::from_vector<float>({0, 0, 0, 1.5}, {4}), 0);
  expect_close(neg(x), Tensor::from_vector<float>({2, 0.5, 0, -1.5}, {4}), 0);
  expect_close(abs(x), Tensor::from_vector<float>({2, 0.5, 0, 1.5}, {4}), 0);
  expect_close(sign(x), Tensor::from_vector<float>({-1, -1, 0, 1}, {4}), 0);
  expect_close(square(x), Tensor::from_vector<float>({4, 0.25, 0, 2.25}, {4}), 0);
  expect_close(sigmoid(Tensor::from_vector<float>({0}, {1})), Tensor::from_vector<float>({0.5}, {1}), 1e-7);
  expect_close(tanh(Tensor::from_vector<double>({0.5}, {1})),
               Tensor::from_vector<double>({std::tanh(0.5)}, {1}), 1e-15);
  // gelu(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.8413447460685429
  expect_close(gelu(Tensor::from_vector<double>({1.0}, {1})),
               Tensor::from_vector<double>({0.8413447460685429}, {1}), 1e-12);
  expect_close(gelu(Tensor::from_vector<double>({1.0}, {1}), true),
               Tensor::from_vector<double>({0.8411919906082768}, {1}), 1e-12);
  expect_close(rsqrt(Tensor::from_vector<float>({4}, {1})), Tensor::from_vector<float>({0.5}, {1}), 1e-7);
}

TEST(Elementwise, BroadcastingFollowsNumPy) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor row = Tensor::from_vector<float>({10, 20, 30}, {3});
  const Tensor column = Tensor::from_vector<float>({100, 200}, {2, 1});
  expect_close(a + row, Tensor::from_vector<float>({11, 22, 33, 14, 25, 36}, {2, 3}), 0);
  expect_close(a * column, Tensor::from_vector<float>({100, 200, 300, 800, 1000, 1200}, {2, 3}), 0);
  expect_close(row + column, Tensor::from_vector<float>({110, 120, 130, 210, 220, 230}, {2, 3}), 0);
  expect_close(a - 1.0, Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3}), 0);
  expect_close(2.0 / Tensor::from_vector<float>({4, 8}, {2}), Tensor::from_vector<float>({0.5, 0.25}, {2}), 0);
  EXPECT_THROW(a + Tensor::zeros({2}), InvalidArgument);
  EXPECT_THROW(a + Tensor::zeros({3}, DType::f64), InvalidArgument);
}

TEST(Elementwise, ComparisonsAndWhere) {
  const Tensor a = Tensor::from_vector<int>({1, 5, 3}, {3});
  const Tensor b = Tensor::from_vector<int>({2, 5, 1}, {3});
  EXPECT_EQ(greater(a, b).to_vector<int>(), (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(greater_equal(a, b).to_vector<int>(), (std::vector<int>{0, 1, 1}));
  EXPECT_EQ(equal(a, b).to_vector<int>(), (std::vector<int>{0, 1, 0}));
  EXPECT_EQ(less(a, b).to_vector<int>(), (std::vector<int>{1, 0, 0}));
  EXPECT_EQ(where(greater(a, b), a, b).to_vector<int>(), (std::vector<int>{2, 5, 3}));
  EXPECT_EQ(maximum(a, b).to_vector<int>(), (std::vector<int>{2, 5, 3}));
  EXPECT_EQ(div(a, Tensor::from_vector<int>({0, 2, 1}, {3})).to_vector<int>(), (std::vector<int>{0, 2, 3}));
  EXPECT_THROW(where(a, a, b), InvalidArgument);
}

// The oneDNN path (large f32) and the reference loops (f64) must agree.
TEST(Elementwise, OneDnnPathMatchesReference) {
  const Shape shape{64, 17, 19};
  const Tensor x64 = random_tensor(shape, -3, 3);
  const Tensor y64 = random_tensor(shape, 0.5, 3);
  const Tensor x32 = cast(x64, DType::f32);
  const Tensor y32 = cast(y64, DType::f32);
  const Tensor row64 = random_tensor({19}, 0.5, 2);
  using UnaryFn = Tensor (*)(const Tensor&);
  for (UnaryFn fn : {UnaryFn(relu), UnaryFn(sigmoid), UnaryFn(tanh), UnaryFn(exp), UnaryFn(neg),
                     UnaryFn(square), UnaryFn(abs)}) {
    expect_close(fn(x32), fn(x64), 1e-5);
  }
  expect_close(gelu(x32), gelu(x64), 1e-5);
  expect_close(gelu(x32, true), gelu(x64, true), 1e-5);
  expect_close(log(y32), log(y64), 1e-5);
  expect_close(sqrt(y32), sqrt(y64), 1e-5);
  expect_close(rsqrt(y32), rsqrt(y64), 1e-5);
  expect_close(relu_backward(y32, x32), relu_backward(y64, x64), 1e-5);
  expect_close(gelu_backward(y32, x32), gelu_backward(y64, x64), 1e-5);
  expect_close(sigmoid_backward(y32, sigmoid(x32)), sigmoid_backward(y64, sigmoid(x64)), 1e-5);
  expect_close(tanh_backward(y32, tanh(x32)), tanh_backward(y64, tanh(x64)), 1e-5);
  const Tensor row32 = cast(row64, DType::f32);
  expect_close(x32 + row32, x64 + row64, 1e-5);
  expect_close(x32 / row32, x64 / row64, 1e-5);
  expect_close(maximum(x32, y32), maximum(x64, y64), 1e-6);
  expect_close(minimum(x32, row32), minimum(x64, row64), 1e-6);
}

TEST(Elementwise, Bf16AndF16Work) {
  const Tensor x = random_tensor({300, 70}, -2, 2);
  for (DType dtype : {DType::bf16, DType::f16}) {
    const Tensor low = cast(x, dtype);
    expect_close(relu(low) * 2.0, relu(x) * 2.0, 1e-2);
    expect_close(sigmoid(low), sigmoid(x), 1e-2);
  }
}

TEST(ElementwiseGradients, UnaryOps) {
  using UnaryFn = Tensor (*)(const Tensor&);
  const std::vector<std::pair<const char*, UnaryFn>> ops = {
      {"neg", neg},   {"abs", abs},   {"exp", exp},         {"square", square},
      {"relu", relu}, {"tanh", tanh}, {"sigmoid", sigmoid},
  };
  for (const auto& [name, fn] : ops) {
    expect_gradients_match([fn](const auto& in) { return fn(in[0]); },
                           {random_tensor(random_shape(3))}, {}, name);
  }
  for (bool approximate : {false, true}) {
    expect_gradients_match([approximate](const auto& in) { return gelu(in[0], approximate); },
                           {random_tensor(random_shape(2))}, {}, "gelu");
  }
  for (auto fn : {UnaryFn(log), UnaryFn(sqrt), UnaryFn(rsqrt)}) {
    expect_gradients_match([fn](const auto& in) { return fn(in[0]); },
                           {random_tensor(random_shape(2), 0.5, 3)}, {}, "log/sqrt/rsqrt");
  }
}

TEST(ElementwiseGradients, BinaryOpsWithBroadcasting) {
  using BinaryFn = Tensor (*)(const Tensor&, const Tensor&);
  const std::vector<std::pair<const char*, BinaryFn>> ops = {
      {"add", add}, {"sub", sub}, {"mul", mul}, {"maximum", maximum}, {"minimum", minimum}};
  for (const auto& [name, fn] : ops) {
    const Shape shape = random_shape(3);
    Shape broadcast_shape = {shape[1], 1};  // broadcasts against the last two axes
    expect_gradients_match([fn](const auto& in) { return fn(in[0], in[1]); },
                           {random_tensor(shape), random_tensor(broadcast_shape)}, {}, name);
  }
  const Shape shape = random_shape(2);
  expect_gradients_match([](const auto& in) { return div(in[0], in[1]); },
                         {random_tensor(shape), random_tensor({shape[1]}, 0.5, 2)}, {}, "div");
  expect_gradients_match([](const auto& in) { return pow(in[0], in[1]); },
                         {random_tensor(shape, 0.5, 2), random_tensor(shape, -1.5, 1.5)}, {}, "pow");
  expect_gradients_match(
      [](const auto& in) { return where(greater(in[0], in[1]), in[0], in[1] * 3.0); },
      {random_tensor(shape), random_tensor(shape)}, {}, "where");
}

TEST(ElementwiseGradients, BackwardKernelsAreDifferentiable) {
  const Shape shape = random_shape(2);
  expect_gradients_match([](const auto& in) { return sigmoid_backward(in[0], in[1]); },
                         {random_tensor(shape), random_tensor(shape, 0.1, 0.9)}, {},
                         "sigmoid_backward");
  expect_gradients_match([](const auto& in) { return tanh_backward(in[0], in[1]); },
                         {random_tensor(shape), random_tensor(shape, -0.9, 0.9)}, {},
                         "tanh_backward");
  expect_gradients_match([](const auto& in) { return relu_backward(in[0], in[1]); },
                         {random_tensor(shape), random_tensor(shape)}, {1e-6, 1e-6, {true, false}},
                         "relu_backward");
}

}  // namespace
}  // namespace tandem
