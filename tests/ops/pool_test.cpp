// Max, average and global average pooling with their backward ops: hand-derived values
// (including TensorFlow's tie and padding rules), the oneDNN path (f32, bf16) against the f64
// loops, finite-difference gradients, cost and errors.
#include <gtest/gtest.h>

#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "ops/window_test_support.h"

namespace tandem {
namespace {

using testing::distinct_tensor;
using testing::expect_close;
using testing::expect_gradients_match;
using testing::expect_invalid_argument;
using testing::iota_values;
using testing::random_extent;
using testing::random_tensor;

Pool2DOptions pool(std::array<std::int64_t, 2> window, std::array<std::int64_t, 2> strides,
                   Padding padding = Padding::valid) {
  return {window, strides, padding};
}

// ---- hand-derived values ----
class PoolHandDerived : public ::testing::TestWithParam<DType> {
 protected:
  Tensor values(const std::vector<double>& data, const Shape& shape) const {
    return cast(Tensor::from_vector(data, shape), GetParam());
  }
  // 1..16 on a 4x4 grid and 1..9 on a 3x3 grid, one channel.
  Tensor x4() const { return values(iota_values(16), {1, 4, 4, 1}); }
  Tensor x3() const { return values(iota_values(9), {1, 3, 3, 1}); }
};

TEST_P(PoolHandDerived, MaxAndAverageOfDisjointWindows) {
  expect_close(max_pool2d(x4()), values({6, 8, 14, 16}, {1, 2, 2, 1}), 0);
  expect_close(avg_pool2d(x4()), values({3.5, 5.5, 11.5, 13.5}, {1, 2, 2, 1}), 0);
}

TEST_P(PoolHandDerived, SamePaddingIsExcludedFromAverages) {
  // out = ceil(3 / 2) = 2, pad_total = (2 - 1) * 2 + 2 - 3 = 1, all of it after; the last
  // row and column of windows see 2 or 1 real cells and average over those only.
  const Pool2DOptions same = pool({2, 2}, {2, 2}, Padding::same);
  expect_close(max_pool2d(x3(), same), values({5, 6, 8, 9}, {1, 2, 2, 1}), 0);
  expect_close(avg_pool2d(x3(), same), values({3, 4.5, 7.5, 9}, {1, 2, 2, 1}), 0);
  const Tensor dy = values({1, 1, 1, 1}, {1, 2, 2, 1});
  expect_close(avg_pool2d_backward(dy, {1, 3, 3, 1}, same),
               values({0.25, 0.25, 0.5, 0.25, 0.25, 0.5, 0.5, 0.5, 1}, {1, 3, 3, 1}), 0);
  expect_close(max_pool2d_backward(dy, x3(), same),
               values({0, 0, 0, 0, 1, 1, 0, 1, 1}, {1, 3, 3, 1}), 0);
}

TEST_P(PoolHandDerived, OverlappingWindowsAccumulate) {
  // 3x3 windows with stride 1 on 4x4 have maxima 11, 12, 15, 16. 2x2 windows with stride 1 on
  // 3x3 find 5, 6, 8, 9; every inner cell belongs to several windows.
  const Pool2DOptions overlapping = pool({2, 2}, {1, 1});
  expect_close(max_pool2d(x4(), pool({3, 3}, {1, 1})), values({11, 12, 15, 16}, {1, 2, 2, 1}), 0);
  const Tensor dy = values({1, 2, 3, 4}, {1, 2, 2, 1});
  expect_close(max_pool2d_backward(dy, x3(), overlapping),
               values({0, 0, 0, 0, 1, 2, 0, 3, 4}, {1, 3, 3, 1}), 0);
  // Each window spreads its dy over its 4 cells; the centre collects (1 + 2 + 3 + 4) / 4.
  expect_close(avg_pool2d_backward(dy, {1, 3, 3, 1}, overlapping),
               values({0.25, 0.75, 0.5, 1, 2.5, 1.5, 0.75, 1.75, 1}, {1, 3, 3, 1}), 0);
}

TEST_P(PoolHandDerived, TiesSendTheGradientToTheFirstMaximum) {
  // Windows [[3, 1], [3, 2]] and [[5, 5], [5, 4]] (and all-equal zeros on a second channel).
  const Tensor x = values({3, 0, 1, 0, 5, 0, 5, 0, 3, 0, 2, 0, 5, 0, 4, 0}, {1, 2, 4, 2});
  const Tensor dy = values({10, 1, 20, 2}, {1, 1, 2, 2});
  expect_close(max_pool2d(x), values({3, 0, 5, 0}, {1, 1, 2, 2}), 0);
  expect_close(max_pool2d_backward(dy, x),
               values({10, 1, 0, 0, 20, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 2, 4, 2}), 0);
}

TEST_P(PoolHandDerived, GlobalAverage) {
  // x[n, h, w, c] = 1 + 3 (2 (2 n + h) + w) + c: the mean over (h, w) is 5.5 + c + 12 n.
  const Tensor x = values(iota_values(24), {2, 2, 2, 3});
  expect_close(global_avg_pool2d(x), values({5.5, 6.5, 7.5, 17.5, 18.5, 19.5}, {2, 3}), 0);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PoolHandDerived,
                         ::testing::Values(DType::f32, DType::f64, DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- oneDNN (f32, bf16) and the f16 loops against the f64 loops ----
struct PoolCase {
  Shape x_shape;
  Pool2DOptions options;

  std::string str() const {
    return "x " + shape_str(x_shape) + ", window " + std::to_string(options.window[0]) + "x" +
           std::to_string(options.window[1]) + ", " +
           testing::options_str(options.strides, options.padding);
  }
};

std::vector<PoolCase> pool_cases() {
  std::vector<PoolCase> cases{
      // the tutorial CNN's two pooling layers (the second drops the odd last row and column)
      {{2, 26, 26, 32}, pool({2, 2}, {2, 2})},
      {{2, 11, 11, 64}, pool({2, 2}, {2, 2})},
      {{3, 7, 9, 5}, pool({3, 3}, {2, 2}, Padding::same)},
      {{2, 8, 8, 17}, pool({3, 3}, {1, 1}, Padding::same)},
      {{1, 5, 6, 3}, pool({2, 3}, {3, 1})},
      {{2, 4, 4, 1}, pool({4, 4}, {1, 1})},
  };
  for (int i = 0; i < 12; ++i) {
    PoolCase c;
    c.options =
        pool({random_extent(1, 4), random_extent(1, 4)}, {random_extent(1, 3), random_extent(1, 3)},
             random_extent(0, 1) ? Padding::same : Padding::valid);
    c.x_shape = {random_extent(1, 3), c.options.window[0] + random_extent(0, 8),
                 c.options.window[1] + random_extent(0, 8), random_extent(1, 20)};
    cases.push_back(c);
  }
  return cases;
}

void expect_matches_f64(const PoolCase& c, DType dtype, double tolerance) {
  const std::string label = std::string(dtype_name(dtype)) + ", " + c.str();
  auto f64 = [](const Tensor& t) { return cast(t, DType::f64); };
  const Tensor x = random_tensor(c.x_shape, -1, 1, 0, dtype);
  const Tensor y = max_pool2d(x, c.options);
  EXPECT_EQ(y.dtype(), dtype);
  expect_close(y, max_pool2d(f64(x), c.options), 0, label + ", max");
  expect_close(avg_pool2d(x, c.options), avg_pool2d(f64(x), c.options), tolerance, label + ", avg");
  const Tensor dy = random_tensor(y.shape(), -1, 1, 0, dtype);
  expect_close(max_pool2d_backward(dy, x, c.options),
               max_pool2d_backward(f64(dy), f64(x), c.options), tolerance,
               label + ", max backward");
  expect_close(avg_pool2d_backward(dy, c.x_shape, c.options),
               avg_pool2d_backward(f64(dy), c.x_shape, c.options), tolerance,
               label + ", avg backward");
  expect_close(global_avg_pool2d(x), global_avg_pool2d(f64(x)), tolerance, label + ", global");
}

TEST(Pool2D, F32MatchesF64Reference) {
  for (const PoolCase& c : pool_cases()) {
    expect_matches_f64(c, DType::f32, 1e-5);
  }
}

// bf16 rounds many values onto the same grid point, so this also checks that oneDNN breaks
// ties like the loops (first maximum). Where windows overlap, oneDNN sums the gradients in
// bf16 (a rounding per window, 2^-8 relative each) while the loops round once.
TEST(Pool2D, Bf16MatchesF64Reference) {
  for (const PoolCase& c : pool_cases()) {
    expect_matches_f64(c, DType::bf16, 4e-2);
  }
}

TEST(Pool2D, F16MatchesF64Reference) {
  for (const PoolCase& c : pool_cases()) {
    expect_matches_f64(c, DType::f16, 2e-3);
  }
}

// A compiled step's fusion of relu's backward pass into max pooling's (relu_masked) gives what the
// two passes give, bit for bit, in every dtype and geometry (disjoint windows take their own
// loop in f32 and bf16; the others mask after the pass).
TEST(Pool2D, ReluMaskedBackwardEqualsReluBackwardAfterIt) {
  for (const PoolCase& c : pool_cases()) {
    for (const DType dtype : {DType::f32, DType::bf16, DType::f64, DType::f16}) {
      const std::string label = std::string(dtype_name(dtype)) + ", " + c.str();
      // A relu's output (many zeros, ties among them) and a plain one with negative maxima.
      for (const Tensor& x : {relu(random_tensor(c.x_shape, -1, 1, 0, dtype)),
                              random_tensor(c.x_shape, -1, 1, 0, dtype)}) {
        const Tensor dy = random_tensor(max_pool2d(x, c.options).shape(), -1, 1, 0, dtype);
        const Tensor fused =
            call_op(OpKind::max_pool2d_backward, {dy, x},
                    make_op_attrs<OpKind::max_pool2d_backward>({c.options, true}))[0];
        expect_close(fused, relu_backward(max_pool2d_backward(dy, x, c.options), x), 0, label);
      }
    }
  }
}

// ---- gradients ----
TEST(Pool2D, GradientsMatchFiniteDifferences) {
  for (const Pool2DOptions& o : {pool({2, 2}, {2, 2}), pool({3, 3}, {2, 2}, Padding::same),
                                 pool({3, 2}, {1, 1}, Padding::same), pool({2, 3}, {1, 2})}) {
    const Shape x_shape{random_extent(1, 2), random_extent(3, 6), random_extent(3, 6),
                        random_extent(1, 3)};
    const std::string label =
        "x " + shape_str(x_shape) + ", " + testing::options_str(o.strides, o.padding);
    expect_gradients_match([&](const std::vector<Tensor>& in) { return max_pool2d(in[0], o); },
                           {distinct_tensor(x_shape)}, {}, label + ", max");
    expect_gradients_match([&](const std::vector<Tensor>& in) { return avg_pool2d(in[0], o); },
                           {random_tensor(x_shape)}, {}, label + ", avg");
  }
  const Shape x_shape{random_extent(1, 3), random_extent(1, 4), random_extent(1, 4),
                      random_extent(1, 4)};
  expect_gradients_match([](const std::vector<Tensor>& in) { return global_avg_pool2d(in[0]); },
                         {random_tensor(x_shape)}, {}, "global, x " + shape_str(x_shape));
}

// ---- cost and errors ----
TEST(Pool2D, CostCountsWindowCells) {
  const Attrs attrs{{"window", std::vector<std::int64_t>{2, 2}},
                    {"strides", std::vector<std::int64_t>{2, 2}},
                    {"padding", std::string("valid")}};
  const std::vector<TensorMeta> in{{{32, 26, 26, 32}, DType::f32}};
  const std::vector<TensorMeta> out{{{32, 13, 13, 32}, DType::f32}};
  const OpCost cost = op_cost(OpKind::max_pool2d, in, out, attrs);
  EXPECT_DOUBLE_EQ(cost.flops, 32.0 * 13 * 13 * 32 * 4);
  EXPECT_DOUBLE_EQ(cost.bytes, 4.0 * (32 * 26 * 26 * 32 + 32 * 13 * 13 * 32));
  const std::vector<TensorMeta> backward_in{out[0], in[0]};
  EXPECT_DOUBLE_EQ(op_cost(OpKind::max_pool2d_backward, backward_in, in, attrs).flops, cost.flops);
  const std::vector<TensorMeta> global_out{{{32, 32}, DType::f32}};
  EXPECT_DOUBLE_EQ(op_cost(OpKind::global_avg_pool2d, in, global_out, {}).flops,
                   32.0 * 26 * 26 * 32);
}

TEST(Pool2D, ErrorsNameTheProblem) {
  const Tensor x = Tensor::zeros({2, 4, 4, 3});
  expect_invalid_argument(
      [] {
        max_pool2d(Tensor::zeros({4, 4, 3}));
      },
      {"max_pool2d", "rank 4", "(4, 4, 3)"});
  expect_invalid_argument(
      [] {
        avg_pool2d(Tensor::zeros({1, 2, 2, 1}), pool({3, 3}, {1, 1}));
      },
      {"avg_pool2d", "3x3 window", "larger", "(1, 2, 2, 1)", "padding=same"});
  EXPECT_EQ(avg_pool2d(Tensor::zeros({1, 2, 2, 1}), pool({3, 3}, {1, 1}, Padding::same)).shape(),
            (Shape{1, 2, 2, 1}));
  expect_invalid_argument(
      [&] {
        max_pool2d(x, pool({2, 2}, {0, 2}));
      },
      {"max_pool2d", "strides", "positive"});
  expect_invalid_argument(
      [&] {
        max_pool2d(x, pool({2, 0}, {2, 2}));
      },
      {"max_pool2d", "window", "positive"});
  expect_invalid_argument(
      [] {
        max_pool2d(Tensor::zeros({1, 4, 4, 1}, DType::i32));
      },
      {"max_pool2d", "floating"});
  expect_invalid_argument(
      [&] {
        max_pool2d_backward(Tensor::zeros({2, 3, 3, 3}), x);
      },
      {"max_pool2d_backward", "(2, 3, 3, 3)", "(2, 2, 2, 3)"});
  expect_invalid_argument(
      [&] {
        max_pool2d_backward(Tensor::zeros({2, 2, 2, 3}, DType::f64), x);
      },
      {"max_pool2d_backward", "f64", "f32"});
  expect_invalid_argument(
      [] {
        avg_pool2d_backward(Tensor::zeros({2, 2, 2, 4}), {2, 4, 4, 3});
      },
      {"avg_pool2d_backward", "(2, 2, 2, 4)", "(2, 2, 2, 3)"});
  expect_invalid_argument(
      [] {
        global_avg_pool2d(Tensor::zeros({2, 3}));
      },
      {"global_avg_pool2d", "rank 4", "(2, 3)"});
}

}  // namespace
}  // namespace tandem
