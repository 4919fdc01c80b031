// The gradient harness: every op in the table that has a gradient rule is checked here against
// central finite differences in float64, on fresh random shapes and values each run. A new op
// with a gradient rule and no case below fails OpTable.EveryDifferentiableOpIsGradientChecked.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

#include "ops/gradient_check.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

using testing::expect_gradients_match;
using testing::random_extent;
using testing::random_tensor;

Shape random_shape(int rank, std::int64_t low = 1, std::int64_t high = 4) {
  Shape shape;
  for (int i = 0; i < rank; ++i)
    shape.push_back(random_extent(low, high));
  return shape;
}

// Inputs with pairwise distinct values, so max/max-pool have a unique winner that a step of
// 1e-6 cannot change.
Tensor distinct_tensor(const Shape& shape) {
  std::vector<double> values(static_cast<std::size_t>(shape_numel(shape)));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = 0.1 + 0.37 * static_cast<double>(i);
  std::shuffle(values.begin(), values.end(), testing::test_rng());
  return Tensor::from_vector(values, shape);
}

void unary_case(Tensor (*fn)(const Tensor&), double low = -2, double high = 2) {
  expect_gradients_match([fn](const auto& in) { return fn(in[0]); },
                         {random_tensor(random_shape(3), low, high)});
}

template <typename Fn>
void binary_case(Fn fn, double low = -2, double high = 2) {
  const Shape shape = random_shape(3);
  expect_gradients_match([fn](const auto& in) { return fn(in[0], in[1]); },
                         {random_tensor(shape, low, high), random_tensor({shape[2]}, low, high)});
}

using Case = std::function<void()>;

std::map<OpKind, Case> gradient_cases() {
  using K = OpKind;
  std::map<OpKind, Case> cases;
  cases[K::neg] = [] { unary_case(neg); };
  cases[K::abs] = [] { unary_case(abs); };
  cases[K::sign] = [] {
    expect_gradients_match([](const auto& in) { return sign(in[0]) * in[0]; },
                           {random_tensor(random_shape(2))});
  };
  cases[K::exp] = [] { unary_case(exp); };
  cases[K::log] = [] { unary_case(log, 0.2, 3); };
  cases[K::sqrt] = [] { unary_case(sqrt, 0.2, 3); };
  cases[K::rsqrt] = [] { unary_case(rsqrt, 0.2, 3); };
  cases[K::square] = [] { unary_case(square); };
  cases[K::relu] = [] { unary_case(relu); };
  cases[K::gelu] = [] {
    for (bool approximate : {false, true}) {
      expect_gradients_match([approximate](const auto& in) { return gelu(in[0], approximate); },
                             {random_tensor(random_shape(3))});
    }
  };
  cases[K::sigmoid] = [] { unary_case(sigmoid); };
  cases[K::tanh] = [] { unary_case(tanh); };
  cases[K::relu_backward] = [] {
    const Shape shape = random_shape(2);
    expect_gradients_match([](const auto& in) { return relu_backward(in[0], in[1]); },
                           {random_tensor(shape), random_tensor(shape)},
                           {1e-6, 1e-6, {true, false}});
  };
  cases[K::sigmoid_backward] = [] {
    const Shape shape = random_shape(2);
    expect_gradients_match([](const auto& in) { return sigmoid_backward(in[0], in[1]); },
                           {random_tensor(shape), random_tensor(shape, 0.1, 0.9)});
  };
  cases[K::tanh_backward] = [] {
    const Shape shape = random_shape(2);
    expect_gradients_match([](const auto& in) { return tanh_backward(in[0], in[1]); },
                           {random_tensor(shape), random_tensor(shape, -0.9, 0.9)});
  };
  cases[K::add] = [] { binary_case([](auto& a, auto& b) { return add(a, b); }); };
  cases[K::sub] = [] { binary_case([](auto& a, auto& b) { return sub(a, b); }); };
  cases[K::mul] = [] { binary_case([](auto& a, auto& b) { return mul(a, b); }); };
  cases[K::div] = [] { binary_case([](auto& a, auto& b) { return div(a, b); }, 0.3, 2); };
  cases[K::maximum] = [] { binary_case([](auto& a, auto& b) { return maximum(a, b); }); };
  cases[K::minimum] = [] { binary_case([](auto& a, auto& b) { return minimum(a, b); }); };
  cases[K::pow] = [] { binary_case([](auto& a, auto& b) { return pow(a, b); }, 0.3, 2); };
  cases[K::select] = [] {
    const Shape shape = random_shape(2);
    expect_gradients_match(
        [](const auto& in) { return where(greater(in[0], in[1]), in[0], in[1]); },
        {random_tensor(shape), random_tensor({shape[1]})});
  };
  cases[K::sum] = [] {
    expect_gradients_match(
        [](const auto& in) {
          return sum(in[0], {0, 2});
        },
        {random_tensor(random_shape(3))});
  };
  cases[K::mean] = [] {
    expect_gradients_match([](const auto& in) { return mean(in[0], {1}, true); },
                           {random_tensor(random_shape(3))});
  };
  cases[K::max] = [] {
    expect_gradients_match([](const auto& in) { return reduce_max(in[0], {-1}); },
                           {distinct_tensor(random_shape(3))});
  };
  cases[K::broadcast_to] = [] {
    const Shape shape = random_shape(2);
    expect_gradients_match(
        [shape](const auto& in) {
          return broadcast_to(in[0], {3, shape[0], shape[1]});
        },
        {random_tensor({shape[0], 1})});
  };
  cases[K::matmul] = [] {
    const std::int64_t m = random_extent(1, 4), k = random_extent(1, 5), n = random_extent(1, 4);
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        const Shape a_shape = transpose_a ? Shape{k, m} : Shape{m, k};
        const Shape b_shape = transpose_b ? Shape{n, k} : Shape{k, n};
        expect_gradients_match(
            [=](const auto& in) { return matmul(in[0], in[1], in[2], transpose_a, transpose_b); },
            {random_tensor(a_shape), random_tensor(b_shape), random_tensor({n})});
      }
    }
    const std::int64_t batch = random_extent(2, 3);
    expect_gradients_match([](const auto& in) { return matmul(in[0], in[1]); },
                           {random_tensor({batch, m, k}), random_tensor({batch, k, n})});
  };
  cases[K::conv2d] = [] {
    for (Padding padding : {Padding::valid, Padding::same}) {
      Conv2DOptions options;
      options.padding = padding;
      options.strides = {random_extent(1, 2), random_extent(1, 2)};
      options.dilations = {options.strides[0] == 1 ? random_extent(1, 2) : 1, 1};
      const std::int64_t c_in = random_extent(1, 3), c_out = random_extent(1, 3);
      expect_gradients_match(
          [options](const auto& in) { return conv2d(in[0], in[1], in[2], options); },
          {random_tensor({random_extent(1, 2), random_extent(5, 7), random_extent(5, 7), c_in}),
           random_tensor({random_extent(1, 3), random_extent(1, 3), c_in, c_out}),
           random_tensor({c_out})});
    }
  };
  cases[K::max_pool2d] = [] {
    for (Padding padding : {Padding::valid, Padding::same}) {
      const Pool2DOptions options{{2, random_extent(2, 3)}, {2, random_extent(1, 2)}, padding};
      expect_gradients_match([options](const auto& in) { return max_pool2d(in[0], options); },
                             {distinct_tensor({2, random_extent(4, 6), random_extent(4, 6), 2})});
    }
  };
  cases[K::avg_pool2d] = [] {
    for (Padding padding : {Padding::valid, Padding::same}) {
      const Pool2DOptions options{{random_extent(2, 3), 2}, {random_extent(1, 2), 2}, padding};
      expect_gradients_match([options](const auto& in) { return avg_pool2d(in[0], options); },
                             {random_tensor({2, random_extent(4, 6), random_extent(4, 6), 3})});
    }
  };
  cases[K::global_avg_pool2d] = [] {
    expect_gradients_match([](const auto& in) { return global_avg_pool2d(in[0]); },
                           {random_tensor({2, random_extent(1, 4), random_extent(1, 4), 3})});
  };
  cases[K::batch_norm] = [] {
    const std::int64_t channels = random_extent(1, 4);
    const Shape shape{random_extent(2, 3), random_extent(1, 3), random_extent(1, 3), channels};
    expect_gradients_match(
        [](const auto& in) { return batch_norm_training(in[0], in[1], in[2], 1e-3).y; },
        {random_tensor(shape), random_tensor({channels}), random_tensor({channels})},
        {1e-6, 1e-5, {}});
    expect_gradients_match(
        [](const auto& in) {
          return batch_norm_inference(in[0], in[1], in[2], in[3], in[4], 1e-3);
        },
        {random_tensor(shape), random_tensor({channels}), random_tensor({channels}),
         random_tensor({channels}), random_tensor({channels}, 0.5, 2)},
        {1e-6, 1e-6, {true, true, true, false, false}});
  };
  cases[K::softmax] = [] {
    expect_gradients_match([](const auto& in) { return softmax(in[0], 1); },
                           {random_tensor(random_shape(3, 2, 4))});
  };
  cases[K::log_softmax] = [] {
    expect_gradients_match([](const auto& in) { return log_softmax(in[0], -1); },
                           {random_tensor(random_shape(2, 2, 5))});
  };
  cases[K::softmax_backward] = [] {
    const Shape shape = random_shape(2, 2, 4);
    expect_gradients_match([](const auto& in) { return softmax_backward(in[0], in[1], -1); },
                           {random_tensor(shape), softmax(random_tensor(shape), -1)});
  };
  cases[K::log_softmax_backward] = [] {
    const Shape shape = random_shape(2, 2, 4);
    expect_gradients_match([](const auto& in) { return log_softmax_backward(in[0], in[1], -1); },
                           {random_tensor(shape), log_softmax(random_tensor(shape), -1)});
  };
  cases[K::reshape] = [] {
    expect_gradients_match(
        [](const auto& in) {
          return reshape(in[0], {-1, 1});
        },
        {random_tensor(random_shape(3))});
  };
  cases[K::transpose] = [] {
    expect_gradients_match(
        [](const auto& in) {
          return transpose(in[0], {1, 2, 0});
        },
        {random_tensor(random_shape(3))});
  };
  cases[K::concat] = [] {
    const Shape shape = random_shape(2);
    expect_gradients_match(
        [](const auto& in) {
          return concat({in[0], in[1], in[0]}, 0);
        },
        {random_tensor(shape), random_tensor({2, shape[1]})});
  };
  cases[K::slice] = [] {
    const Shape shape = random_shape(2, 2, 4);
    expect_gradients_match(
        [](const auto& in) {
          return slice(in[0], {1, 0}, {-1, 1});
        },
        {random_tensor(shape)});
  };
  cases[K::pad] = [] {
    expect_gradients_match(
        [](const auto& in) {
          return pad(in[0], {{{1, 2}}, {{0, 1}}}, 0.5);
        },
        {random_tensor(random_shape(2))});
  };
  cases[K::cast] = [] {
    expect_gradients_match([](const auto& in) { return cast(cast(in[0], DType::f32), DType::f64); },
                           {random_tensor(random_shape(2))}, {1e-3, 1e-3, {}});
  };
  cases[K::dropout] = [] {
    // The mask is drawn once per call; re-seeding a fresh generator each evaluation keeps the
    // mask fixed across the finite-difference evaluations.
    expect_gradients_match(
        [](const auto& in) {
          Generator generator(1234);
          return dropout(in[0], 0.4, generator).y;
        },
        {random_tensor(random_shape(3))});
  };
  cases[K::sparse_softmax_cross_entropy] = [] {
    const std::int64_t batch = random_extent(1, 4), classes = random_extent(2, 5);
    std::vector<std::int32_t> labels;
    for (std::int64_t i = 0; i < batch; ++i)
      labels.push_back(static_cast<std::int32_t>(random_extent(0, classes - 1)));
    const Tensor label_tensor = Tensor::from_vector(labels, {batch});
    expect_gradients_match(
        [label_tensor](const auto& in) {
          return sparse_softmax_cross_entropy_with_logits(in[0], label_tensor).loss;
        },
        {random_tensor({batch, classes})});
  };
  cases[K::gather] = [] {
    const std::int64_t rows = random_extent(2, 5), count = random_extent(1, 6);
    std::vector<std::int64_t> ids;
    for (std::int64_t i = 0; i < count; ++i)
      ids.push_back(random_extent(0, rows - 1));
    ids.push_back(ids.front());  // a repeated index: its rows' gradients add up
    const Tensor indices = reshape(Tensor::from_vector(ids, {count + 1}), {1, count + 1});
    expect_gradients_match([indices](const auto& in) { return gather(in[0], indices); },
                           {random_tensor({rows, random_extent(1, 3), 2})});
  };
  cases[K::scatter_add] = [] {
    const std::int64_t rows = random_extent(2, 5), count = random_extent(1, 6);
    std::vector<std::int32_t> ids;
    for (std::int64_t i = 0; i < count; ++i)
      ids.push_back(static_cast<std::int32_t>(random_extent(0, rows - 1)));
    const Tensor indices = Tensor::from_vector(ids, {count});
    expect_gradients_match(
        [indices, rows](const auto& in) { return scatter_add(in[0], indices, rows); },
        {random_tensor({count, random_extent(1, 4)})});
  };
  cases[K::layer_norm] = [] {
    const std::int64_t features = random_extent(2, 6);
    expect_gradients_match([](const auto& in) { return layer_norm(in[0], in[1], in[2], 1e-3).y; },
                           {random_tensor({random_extent(1, 3), random_extent(1, 3), features}),
                            random_tensor({features}), random_tensor({features})},
                           {1e-6, 1e-5, {}});
    // The statistics as outputs too: their gradients flow back to x.
    expect_gradients_match(
        [](const auto& in) {
          const LayerNormResult result = layer_norm(in[0], in[1], in[2], 1e-3);
          return result.y * 0.5 + reshape(result.mean * 2.0 + result.rstd, {-1, 1});
        },
        {random_tensor({random_extent(1, 4), features}), random_tensor({features}),
         random_tensor({features})},
        {1e-6, 1e-5, {}});
  };
  return cases;
}

TEST(OpTable, EveryOpIsDefined) {
  for (int i = 0; i < kNumOps; ++i) {
    EXPECT_TRUE(op_is_defined(static_cast<OpKind>(i))) << "op #" << i << " has no OpDef";
  }
}

TEST(OpTable, EveryDifferentiableOpIsGradientChecked) {
  const std::map<OpKind, Case> cases = gradient_cases();
  for (int i = 0; i < kNumOps; ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (!op_is_defined(kind) || op_def(kind).gradient == nullptr) continue;
    const auto it = cases.find(kind);
    if (it == cases.end()) {
      ADD_FAILURE() << "op " << op_name(kind) << " has a gradient rule but no gradient check";
      continue;
    }
    SCOPED_TRACE(op_name(kind));
    it->second();
  }
}

}  // namespace
}  // namespace tandem
