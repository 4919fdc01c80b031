// conv2d and its backward ops: hand-derived values, the oneDNN path (f32, bf16) against the f64
// loops on assorted geometries, constant filters kept reordered, finite-difference gradients,
// cost, attributes and errors.
#include <gtest/gtest.h>

#include <thread>

#include "ops/backend.h"
#include "ops/op_attrs.h"
#include "ops/window_test_support.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::expect_gradients_match;
using testing::expect_invalid_argument;
using testing::iota_values;
using testing::random_extent;
using testing::random_tensor;

Conv2DOptions options(std::array<std::int64_t, 2> strides, Padding padding,
                      std::array<std::int64_t, 2> dilations = {1, 1}) {
  return {strides, padding, dilations};
}

// ---- hand-derived values ----
// x = [[1, 2, 3], [4, 5, 6], [7, 8, 9]] (one channel), filter [[1, 2], [3, 4]].
class ConvHandDerived : public ::testing::TestWithParam<DType> {
 protected:
  Tensor x() const { return cast(Tensor::from_vector(iota_values(9), {1, 3, 3, 1}), GetParam()); }
  Tensor filter() const {
    return cast(Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2, 1, 1}), GetParam());
  }
  Tensor values(const std::vector<double>& data, const Shape& shape) const {
    return cast(Tensor::from_vector(data, shape), GetParam());
  }
};

TEST_P(ConvHandDerived, ValidPaddingWithBias) {
  // y[0, 0] = 1*1 + 2*2 + 4*3 + 5*4 = 37, then each step right adds 10, each step down 30.
  const Tensor bias = values({0.5}, {1});
  expect_close(conv2d(x(), filter(), bias), values({37.5, 47.5, 67.5, 77.5}, {1, 2, 2, 1}), 0);
}

TEST_P(ConvHandDerived, SamePaddingPadsAfter) {
  // pad_total = (3 - 1) + 2 - 3 = 1: nothing before, one row/column of zeros after.
  const Tensor y = conv2d(x(), filter(), options({1, 1}, Padding::same));
  expect_close(
      y,
      values({37, 47, 3 * 1 + 6 * 3, 67, 77, 6 * 1 + 9 * 3, 7 + 8 * 2, 8 + 9 * 2, 9}, {1, 3, 3, 1}),
      0);
}

TEST_P(ConvHandDerived, StrideTwoSamePadsBothSides) {
  // out = ceil(3 / 2) = 2, pad_total = (2 - 1) * 2 + 3 - 3 = 2: one before, one after; a 3x3
  // filter of ones sums the 2x2 corners of x.
  const Tensor ones = values(std::vector<double>(9, 1.0), {3, 3, 1, 1});
  expect_close(conv2d(x(), ones, options({2, 2}, Padding::same)),
               values({1 + 2 + 4 + 5, 2 + 3 + 5 + 6, 4 + 5 + 7 + 8, 5 + 6 + 8 + 9}, {1, 2, 2, 1}),
               0);
}

TEST_P(ConvHandDerived, DilationSkipsCells) {
  // x = 0..24 on 5x5; a dilated 2x2 filter of ones touches (r, c), (r, c+2), (r+2, c), (r+2, c+2).
  const Tensor x = values(iota_values(25, 0.0), {1, 5, 5, 1});
  const Tensor ones = values({1, 1, 1, 1}, {2, 2, 1, 1});
  const Tensor y = conv2d(x, ones, options({1, 1}, Padding::valid, {2, 2}));
  std::vector<double> expected;
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      const double top_left = r * 5 + c;
      expected.push_back(4 * top_left + 2 + 10 + 12);
    }
  }
  expect_close(y, values(expected, {1, 3, 3, 1}), 0);
}

TEST_P(ConvHandDerived, ChannelsMixLikeAMatmul) {
  // A 1x1 convolution multiplies each pixel's (C_in,) vector by the (C_in, C_out) filter.
  const Tensor x = values({1, 2, 3, 4}, {1, 1, 2, 2});
  const Tensor filter = values({1, 2, 3, 4}, {1, 1, 2, 2});
  expect_close(conv2d(x, filter), values({7, 10, 15, 22}, {1, 1, 2, 2}), 0);
}

TEST_P(ConvHandDerived, BackwardOps) {
  const Tensor dy = values({1, 1, 1, 1}, {1, 2, 2, 1});
  // Each input cell collects the filter taps of the windows covering it.
  expect_close(conv2d_backward_input(dy, filter(), {1, 3, 3, 1}),
               values({1, 3, 2, 4, 10, 6, 3, 7, 4}, {1, 3, 3, 1}), 0);
  // Each filter tap collects the input cells it saw: the 2x2 corner sums of x.
  const std::vector<Tensor> grads = conv2d_backward_filter(x(), dy, {2, 2, 1, 1}, true);
  ASSERT_EQ(grads.size(), 2u);
  expect_close(grads[0], values({12, 16, 24, 28}, {2, 2, 1, 1}), 0);
  expect_close(grads[1], values({4}, {1}), 0);
  EXPECT_EQ(conv2d_backward_filter(x(), dy, {2, 2, 1, 1}, false).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ConvHandDerived,
                         ::testing::Values(DType::f32, DType::f64, DType::bf16, DType::f16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// ---- oneDNN (f32, bf16) and the f16 loops against the f64 loops ----
struct ConvCase {
  Shape x_shape;
  Shape filter_shape;
  Conv2DOptions options;

  std::string str() const {
    return "x " + shape_str(x_shape) + ", filter " + shape_str(filter_shape) + ", " +
           testing::options_str(options.strides, options.padding) + ", dilations " +
           std::to_string(options.dilations[0]) + "x" + std::to_string(options.dilations[1]);
  }
};

ConvCase random_conv_case() {
  ConvCase c;
  const std::int64_t k_h = random_extent(1, 4);
  const std::int64_t k_w = random_extent(1, 4);
  c.options.strides = {random_extent(1, 2), random_extent(1, 3)};
  c.options.dilations = {random_extent(1, 2), random_extent(1, 2)};
  c.options.padding = random_extent(0, 1) ? Padding::same : Padding::valid;
  const std::int64_t in_c = random_extent(0, 2) == 0 ? 1 : random_extent(1, 6);
  c.x_shape = {random_extent(1, 3), (k_h - 1) * c.options.dilations[0] + random_extent(1, 7),
               (k_w - 1) * c.options.dilations[1] + random_extent(1, 7), in_c};
  c.filter_shape = {k_h, k_w, in_c, random_extent(1, 9)};
  return c;
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> cases{
      // the tutorial CNN's two layers
      {{2, 28, 28, 1}, {3, 3, 1, 32}, options({1, 1}, Padding::valid)},
      {{2, 13, 13, 32}, {3, 3, 32, 64}, options({1, 1}, Padding::valid)},
      {{3, 9, 7, 3}, {3, 3, 3, 5}, options({2, 2}, Padding::same)},
      {{2, 11, 10, 4}, {3, 3, 4, 6}, options({1, 1}, Padding::same, {2, 2})},
      {{1, 6, 6, 2}, {5, 5, 2, 3}, options({2, 2}, Padding::same)},
      {{2, 15, 13, 1}, {4, 2, 1, 7}, options({2, 3}, Padding::valid)},
      {{2, 8, 8, 16}, {1, 1, 16, 16}, options({1, 1}, Padding::valid)},
      {{1, 12, 12, 3}, {3, 3, 3, 24}, options({2, 2}, Padding::valid, {2, 1})},
      // strided 1x1 filters: ResNet-50's last downsampling one at 112x112 (7x7 to 4x4), which
      // runs on the packed positions it reads, and others that run as given
      {{2, 7, 7, 1024}, {1, 1, 1024, 2048}, options({2, 2}, Padding::same)},
      {{2, 14, 14, 64}, {1, 1, 64, 128}, options({2, 2}, Padding::same)},
      {{1, 9, 8, 16}, {1, 1, 16, 32}, options({2, 3}, Padding::valid)},
      // few input channels, whose f32 filter gradient runs on conv_few_channels.cpp's loops on
      // AVX-512 CPUs (and the forward pass, up to nine window entries: the last): over several
      // passes of nine window entries and a channel block and a part (40), a partial second half
      // of a block (20), three blocks (70)
      {{2, 12, 11, 3}, {3, 3, 3, 40}, options({1, 2}, Padding::same)},
      {{3, 10, 9, 1}, {5, 5, 1, 20}, options({1, 1}, Padding::same, {1, 2})},
      {{2, 9, 9, 2}, {2, 2, 2, 70}, options({2, 1}, Padding::valid)},
      // 3x3 filters on 2x2 images (ResNet-50's last stage from 64x64 inputs), whose filter
      // gradient runs as one product over the batch where oneDNN picks its GEMM kernel
      {{3, 2, 2, 64}, {3, 3, 64, 48}, options({1, 1}, Padding::same)},
      // few positions for their channels, which run as products of the unrolled windows in f32
      // (has_few_positions): a 1x1 filter on x as it stands, a strided 1x1 one on the positions
      // it reads, windows that read padding, a strided and a dilated window (whose input
      // gradients sum overlapping windows), and one like ResNet-50's 3x3 ones at 2x2 (from 64x64
      // inputs)
      {{2, 2, 2, 40}, {1, 1, 40, 24}, options({1, 1}, Padding::valid)},
      {{2, 4, 4, 24}, {1, 1, 24, 40}, options({2, 2}, Padding::same)},
      {{2, 3, 3, 16}, {3, 3, 16, 24}, options({1, 1}, Padding::same)},
      {{2, 5, 5, 32}, {3, 3, 32, 16}, options({2, 2}, Padding::valid)},
      {{1, 4, 4, 40}, {3, 3, 40, 8}, options({1, 1}, Padding::same, {2, 1})},
      {{8, 2, 2, 256}, {3, 3, 256, 256}, options({1, 1}, Padding::same)},
      // and ones whose bf16 products need no padding on AMX (whole 64-channel blocks), plain
      // and strided
      {{4, 2, 2, 64}, {3, 3, 64, 128}, options({1, 1}, Padding::same)},
      {{2, 4, 4, 64}, {3, 3, 64, 64}, options({2, 2}, Padding::same)},
  };
  for (int i = 0; i < 12; ++i) {
    cases.push_back(random_conv_case());
  }
  return cases;
}

void expect_matches_f64(const ConvCase& c, DType dtype, double tolerance) {
  const std::string label = std::string(dtype_name(dtype)) + ", " + c.str();
  auto f64 = [](const Tensor& t) { return cast(t, DType::f64); };
  const Tensor x = random_tensor(c.x_shape, -1, 1, 0, dtype);
  const Tensor filter = random_tensor(c.filter_shape, -1, 1, 0, dtype);
  const Tensor bias = random_tensor({c.filter_shape[3]}, -1, 1, 0, dtype);
  const Tensor y = conv2d(x, filter, bias, c.options);
  EXPECT_EQ(y.dtype(), dtype);
  expect_close(y, conv2d(f64(x), f64(filter), f64(bias), c.options), tolerance,
               label + ", forward with bias");
  expect_close(conv2d(x, filter, c.options), conv2d(f64(x), f64(filter), c.options), tolerance,
               label + ", forward");

  const Tensor dy = random_tensor(y.shape(), -1, 1, 0, dtype);
  expect_close(conv2d_backward_input(dy, filter, c.x_shape, c.options),
               conv2d_backward_input(f64(dy), f64(filter), c.x_shape, c.options), tolerance,
               label + ", backward input");
  for (bool with_bias : {true, false}) {
    const std::vector<Tensor> grads =
        conv2d_backward_filter(x, dy, c.filter_shape, with_bias, c.options);
    const std::vector<Tensor> expected =
        conv2d_backward_filter(f64(x), f64(dy), c.filter_shape, with_bias, c.options);
    ASSERT_EQ(grads.size(), with_bias ? 2u : 1u);
    for (std::size_t i = 0; i < grads.size(); ++i) {
      expect_close(grads[i], expected[i], tolerance,
                   label + (i == 0 ? ", backward filter" : ", backward bias"));
    }
  }
}

TEST(Conv2D, F32MatchesF64Reference) {
  for (const ConvCase& c : conv_cases()) {
    expect_matches_f64(c, DType::f32, 1e-4);
  }
}

// bf16 inputs are exact in f64, so the gap is the f32 accumulation and the bf16 rounding of
// the result (2^-8 relative).
TEST(Conv2D, Bf16MatchesF64Reference) {
  for (const ConvCase& c : conv_cases()) {
    expect_matches_f64(c, DType::bf16, 1e-2);
  }
}

TEST(Conv2D, F16MatchesF64Reference) {
  for (const ConvCase& c : conv_cases()) {
    expect_matches_f64(c, DType::f16, 2e-3);
  }
}

TEST(Conv2D, RepeatedCallsReuseCachedPrimitivesCorrectly) {
  // Same shapes with different options must not share a primitive; the second round hits the
  // cache and must still read the new filter values.
  const Tensor x = random_tensor({2, 9, 9, 3}, -1, 1, 0, DType::f32);
  for (int round = 0; round < 2; ++round) {
    const Tensor filter = random_tensor({3, 3, 3, 4}, -1, 1, 0, DType::f32);
    for (const Conv2DOptions& o :
         {options({1, 1}, Padding::valid), options({1, 1}, Padding::same),
          options({2, 2}, Padding::same), options({1, 1}, Padding::valid, {2, 2})}) {
      expect_close(conv2d(x, filter, o), conv2d(cast(x, DType::f64), cast(filter, DType::f64), o),
                   1e-4);
    }
  }
}

// A constant filter is reordered once and kept: later calls, and another constant filter of the
// same shape, compute with their own values; in-place writes into a constant are refused.
TEST(Conv2D, ConstantFiltersAreKeptReorderedAndStayConstant) {
  const Tensor x = random_tensor({1, 14, 14, 16}, -1, 1, 0, DType::f32);
  for (int round = 0; round < 2; ++round) {
    Tensor filter = random_tensor({3, 3, 16, 32}, -1, 1, 0, DType::f32);
    const Tensor expected = conv2d(x, filter, options({1, 1}, Padding::same));
    filter.set_constant(true);
    for (int call = 0; call < 2; ++call) {
      EXPECT_EQ(conv2d(x, filter, options({1, 1}, Padding::same)).to_vector<float>(),
                expected.to_vector<float>());
    }
    EXPECT_THROW(assign(filter, Tensor::zeros(filter.shape())), InvalidArgument);
    EXPECT_THROW(filter.set_data(Tensor::zeros(filter.shape())), InvalidArgument);
  }
}

// Constant filters with few positions for their channels: below 64 positions on the kept
// reordered filter, from 64 on as products (products_allowed) on the filter kept in the layout
// the product picked (build_forward_product); each constant filter of the same shape computes
// with its own values.
TEST(Conv2D, ConstantFiltersWithFewPositions) {
  for (const Shape& x_shape : {Shape{1, 2, 2, 64}, Shape{16, 2, 2, 64}}) {
    const Tensor x = random_tensor(x_shape, -1, 1, 0, DType::f32);
    for (int round = 0; round < 2; ++round) {
      Tensor filter = random_tensor({3, 3, 64, 96}, -1, 1, 0, DType::f32);
      const Tensor expected =
          conv2d(cast(x, DType::f64), cast(filter, DType::f64), options({1, 1}, Padding::same));
      filter.set_constant(true);
      for (int call = 0; call < 2; ++call) {
        expect_close(conv2d(x, filter, options({1, 1}, Padding::same)), expected, 1e-4,
                     shape_str(x_shape) + ", round " + std::to_string(round));
      }
    }
  }
}

// Constant f32 filters over at most 16 positions with output channels in whole vectors of 16 run
// on the streamed loops (backend/cpu/conv_streamed_filter.h; oneDNN's kernels on CPUs without
// AVX-512): one position and sixteen, x its own windows and unrolled ones (padded, strided,
// dilated), positions over several images; alone, with bias and relu, and with a residual too;
// each constant filter of the same shape with its own values.
TEST(Conv2D, ConstantFiltersOverFewPositionsWithFusedOps) {
  const std::vector<ConvCase> cases{
      {{1, 1, 1, 40}, {1, 1, 40, 16}, options({1, 1}, Padding::valid)},
      {{1, 4, 4, 32}, {3, 3, 32, 48}, options({1, 1}, Padding::same)},
      {{1, 7, 7, 24}, {1, 1, 24, 32}, options({2, 2}, Padding::valid)},
      {{3, 2, 1, 8}, {1, 1, 8, 32}, options({1, 1}, Padding::valid)},
      {{1, 5, 5, 16}, {3, 3, 16, 16}, options({1, 1}, Padding::valid, {2, 2})},
      {{2, 3, 3, 64}, {3, 3, 64, 64}, options({2, 2}, Padding::same)},
  };
  const auto f64 = [](const Tensor& t) { return cast(t, DType::f64); };
  for (const ConvCase& c : cases) {
    for (int round = 0; round < 2; ++round) {
      const std::string label = c.str() + ", round " + std::to_string(round);
      const Tensor x = random_tensor(c.x_shape, -1, 1, 0, DType::f32);
      Tensor filter = random_tensor(c.filter_shape, -1, 1, 0, DType::f32);
      const Tensor bias = random_tensor({c.filter_shape[3]}, -1, 1, 0, DType::f32);
      const Tensor expected = conv2d(f64(x), f64(filter), f64(bias), c.options);
      const Tensor residual = random_tensor(expected.shape(), -1, 1, 0, DType::f32);
      filter.set_constant(true);
      expect_close(conv2d(x, filter, c.options), conv2d(f64(x), f64(filter), c.options), 1e-4,
                   label);
      expect_close(call_op(OpKind::conv2d, {x, filter, bias},
                           make_op_attrs<OpKind::conv2d>({c.options, true, false}))[0],
                   relu(expected), 1e-4, label + ", bias and relu");
      expect_close(call_op(OpKind::conv2d, {x, filter, bias, residual},
                           make_op_attrs<OpKind::conv2d>({c.options, true, true}))[0],
                   relu(expected + f64(residual)), 1e-4, label + ", bias, residual and relu");
    }
  }
}

// The panels the streamed loops keep for a constant filter leave with the filter: after filters
// made, run and dropped one after another, the memory Tandem holds has not grown by their panels
// (an inference server loading model after model). On CPUs without AVX-512 the filters run on
// oneDNN's kernels, whose kept reorders are capped by count instead.
TEST(Conv2D, StreamedFilterPanelsLeaveWithTheFilter) {
  const Tensor x = random_tensor({1, 4, 4, 64}, -1, 1, 0, DType::f32);
  const auto run_a_new_filter = [&] {
    Tensor filter = random_tensor({3, 3, 64, 256}, -1, 1, 0, DType::f32);  // 590 KB
    filter.set_constant(true);
    (void)conv2d(x, filter, options({1, 1}, Padding::same));
  };
  run_a_new_filter();
  const std::size_t held = memory_info(Device::cpu()).held;
  for (int i = 0; i < 8; ++i)
    run_a_new_filter();
  // At most the last filter's panels, kept until the next filter is built.
  EXPECT_LE(memory_info(Device::cpu()).held, held + std::size_t{3 * 3 * 64 * 256 * 4});
}

// A first layer's small window over few channels (conv_few_channels.cpp's forward loops on
// AVX-512 CPUs, at most nine window entries) with bias and relu fused, against f64: the main
// job's, padded, strided and dilated windows, two channels, a 1x1 window over nine, output
// channels in whole and partial blocks of 32 and halves of 16, rows of positions in fours and a
// remainder; the same bits on one thread and on two.
TEST(Conv2D, FewChannelForwardFusesBiasAndRelu) {
  const std::vector<ConvCase> cases{
      {{4, 28, 28, 1}, {3, 3, 1, 32}, options({1, 1}, Padding::valid)},
      {{2, 9, 10, 1}, {3, 3, 1, 16}, options({1, 1}, Padding::same)},
      {{2, 12, 11, 1}, {3, 3, 1, 40}, options({2, 2}, Padding::same)},
      {{3, 10, 9, 1}, {2, 3, 1, 20}, options({1, 1}, Padding::same, {2, 1})},
      {{1, 7, 7, 2}, {2, 2, 2, 8}, options({1, 1}, Padding::valid)},
      {{2, 5, 6, 9}, {1, 1, 9, 70}, options({1, 1}, Padding::valid)},
  };
  const auto f64 = [](const Tensor& t) { return cast(t, DType::f64); };
  for (const ConvCase& c : cases) {
    const Tensor x = random_tensor(c.x_shape, -1, 1, 0, DType::f32);
    const Tensor filter = random_tensor(c.filter_shape, -1, 1, 0, DType::f32);
    const Tensor bias = random_tensor({c.filter_shape[3]}, -1, 1, 0, DType::f32);
    const auto fused = [&] {
      return call_op(OpKind::conv2d, {x, filter, bias},
                     make_op_attrs<OpKind::conv2d>({c.options, true, false}))[0];
    };
    const Tensor on_two = fused();
    expect_close(on_two, relu(conv2d(f64(x), f64(filter), f64(bias), c.options)), 1e-5, c.str());
    const int threads = thread_setting();
    set_num_threads(1);
    const Tensor on_one = fused();
    set_num_threads(threads);
    EXPECT_EQ(on_one.to_vector<float>(), on_two.to_vector<float>()) << c.str();
  }
}

TEST(Conv2D, ConcurrentCallsFromTwoThreads) {
  const Tensor x = random_tensor({4, 12, 12, 8}, -1, 1, 0, DType::f32);
  const Tensor filter = random_tensor({3, 3, 8, 16}, -1, 1, 0, DType::f32);
  const std::vector<double> expected = conv2d(x, filter).to_vector<double>();
  const std::vector<double> expected_same =
      conv2d(x, filter, options({2, 2}, Padding::same)).to_vector<double>();
  bool all_equal = true;
  std::thread other([&] {
    for (int i = 0; i < 20; ++i) {
      if (conv2d(x, filter, options({2, 2}, Padding::same)).to_vector<double>() != expected_same) {
        all_equal = false;
      }
    }
  });
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(conv2d(x, filter).to_vector<double>(), expected);
  }
  other.join();
  EXPECT_TRUE(all_equal);
}

// A convolution with few positions for its channels, run as a product of its unrolled windows,
// takes a residual and relu (as post-ops in f32, afterwards in bf16) with the bits of the
// convolution, add and relu apart, and reads a filter that changed between calls.
TEST(Conv2D, FewPositionsFuseAResidualAndReadNewFilters) {
  const Conv2DOptions same = options({1, 1}, Padding::same);
  for (const auto& [dtype, tolerance] :
       {std::pair{DType::f32, 1e-4}, std::pair{DType::bf16, 2e-2}}) {
    const Tensor x = random_tensor({4, 2, 2, 64}, -1, 1, 0, dtype);
    const Tensor bias = random_tensor({128}, -1, 1, 0, dtype);
    const Tensor residual = random_tensor({4, 2, 2, 128}, -1, 1, 0, dtype);
    for (int round = 0; round < 2; ++round) {
      const Tensor filter = random_tensor({3, 3, 64, 128}, -1, 1, 0, dtype);
      const Tensor fused = call_op(OpKind::conv2d, {x, filter, bias, residual},
                                   make_op_attrs<OpKind::conv2d>({same, true, true}))[0];
      const std::string label = std::string(dtype_name(dtype)) + ", round " + std::to_string(round);
      EXPECT_EQ(fused.to_vector<float>(),
                relu(conv2d(x, filter, bias, same) + residual).to_vector<float>())
          << label;
      const auto f64 = [](const Tensor& t) { return cast(t, DType::f64); };
      expect_close(fused, relu(conv2d(f64(x), f64(filter), f64(bias), same) + f64(residual)),
                   tolerance, label);
    }
  }
}

TEST(Conv2D, EmptyBatch) {
  const Tensor x = Tensor::zeros({0, 5, 5, 2});
  const Tensor filter = random_tensor({3, 3, 2, 4}, -1, 1, 0, DType::f32);
  EXPECT_EQ(conv2d(x, filter).shape(), (Shape{0, 3, 3, 4}));
  const std::vector<Tensor> grads =
      conv2d_backward_filter(x, Tensor::zeros({0, 3, 3, 4}), {3, 3, 2, 4}, true);
  expect_close(grads[0], Tensor::zeros({3, 3, 2, 4}), 0);
  expect_close(grads[1], Tensor::zeros({4}), 0);
}

// ---- gradients ----
TEST(Conv2D, GradientsMatchFiniteDifferences) {
  const std::vector<Conv2DOptions> all_options{
      options({1, 1}, Padding::valid), options({2, 2}, Padding::same),
      options({1, 2}, Padding::same, {2, 1}), options({2, 1}, Padding::valid, {1, 2})};
  for (const Conv2DOptions& o : all_options) {
    const std::int64_t in_c = random_extent(1, 3);
    const std::int64_t out_c = random_extent(1, 3);
    const Shape filter_shape{random_extent(1, 3), random_extent(1, 3), in_c, out_c};
    const Shape x_shape{random_extent(1, 2),
                        (filter_shape[0] - 1) * o.dilations[0] + random_extent(1, 3),
                        (filter_shape[1] - 1) * o.dilations[1] + random_extent(1, 3), in_c};
    const std::string label = "x " + shape_str(x_shape) + ", filter " + shape_str(filter_shape) +
                              ", " + testing::options_str(o.strides, o.padding);
    expect_gradients_match(
        [&](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], in[2], o); },
        {random_tensor(x_shape), random_tensor(filter_shape), random_tensor({out_c})}, {}, label);
    expect_gradients_match([&](const std::vector<Tensor>& in) { return conv2d(in[0], in[1], o); },
                           {random_tensor(x_shape), random_tensor(filter_shape)}, {}, label);
  }
}

// ---- cost and attributes ----
TEST(Conv2D, CostCountsMultiplyAdds) {
  const Attrs attrs{{"strides", std::vector<std::int64_t>{1, 1}},
                    {"padding", std::string("valid")},
                    {"dilations", std::vector<std::int64_t>{1, 1}},
                    {"fused_relu", false},
                    {"fused_add", false}};
  const std::vector<TensorMeta> in{{{32, 13, 13, 32}, DType::f32}, {{3, 3, 32, 64}, DType::f32}};
  const std::vector<TensorMeta> out{{{32, 11, 11, 64}, DType::f32}};
  const double macs = 32.0 * 11 * 11 * 64 * 3 * 3 * 32;
  EXPECT_DOUBLE_EQ(op_cost(OpKind::conv2d, in, out, attrs).flops, 2 * macs);
  EXPECT_DOUBLE_EQ(op_cost(OpKind::conv2d, in, out, attrs).bytes,
                   4.0 * (32 * 13 * 13 * 32 + 3 * 3 * 32 * 64 + 32 * 11 * 11 * 64));

  Attrs filter_attrs = attrs;
  filter_attrs.set("filter_shape", Shape{3, 3, 32, 64}).set("with_bias", true);
  const std::vector<TensorMeta> filter_in{in[0], out[0]};
  const std::vector<TensorMeta> filter_out{in[1], {{64}, DType::f32}};
  EXPECT_DOUBLE_EQ(
      op_cost(OpKind::conv2d_backward_filter, filter_in, filter_out, filter_attrs).flops,
      2 * macs + 32.0 * 11 * 11 * 64);
  Attrs input_attrs = attrs;
  input_attrs.set("input_shape", Shape{32, 13, 13, 32});
  const std::vector<TensorMeta> input_in{out[0], in[1]};
  const std::vector<TensorMeta> input_out{in[0]};
  EXPECT_DOUBLE_EQ(op_cost(OpKind::conv2d_backward_input, input_in, input_out, input_attrs).flops,
                   2 * macs);
}

class AttrRecorder final : public OpObserver {
 public:
  void after_op(OpKind kind, std::span<const Tensor>, std::span<const Tensor>,
                const Attrs& attrs) override {
    kinds.push_back(kind);
    recorded.push_back(attrs);
  }
  std::vector<OpKind> kinds;
  std::vector<Attrs> recorded;
};

TEST(Conv2D, GradientRuleRecordsBothBackwardOpsWithAttributes) {
  const Tensor x = random_tensor({1, 6, 6, 2});
  const Tensor filter = random_tensor({3, 3, 2, 3});
  const Tensor bias = random_tensor({3});
  const Conv2DOptions o = options({2, 2}, Padding::same, {1, 1});
  AttrRecorder recorder;
  GradientTape tape;
  tape.watch(x);
  tape.watch(filter);
  tape.watch(bias);
  const Tensor loss = sum(conv2d(x, filter, bias, o));
  add_op_observer(&recorder);
  const std::vector<Tensor> grads = tape.gradient(loss, {x, filter, bias});
  remove_op_observer(&recorder);
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_EQ(grads[0].shape(), x.shape());
  EXPECT_EQ(grads[1].shape(), filter.shape());
  EXPECT_EQ(grads[2].shape(), bias.shape());
  // d sum(y) / d bias = number of output positions.
  expect_close(grads[2], Tensor::full({3}, 9.0, DType::f64), 1e-12);
  bool saw_input = false;
  bool saw_filter = false;
  for (std::size_t i = 0; i < recorder.kinds.size(); ++i) {
    const Attrs& attrs = recorder.recorded[i];
    if (recorder.kinds[i] == OpKind::conv2d_backward_input) {
      saw_input = true;
      EXPECT_EQ(attrs.get_ints("input_shape"), x.shape());
    } else if (recorder.kinds[i] == OpKind::conv2d_backward_filter) {
      saw_filter = true;
      EXPECT_EQ(attrs.get_ints("filter_shape"), filter.shape());
      EXPECT_TRUE(attrs.get_bool("with_bias"));
    } else {
      continue;
    }
    EXPECT_EQ(attrs.get_ints("strides"), (std::vector<std::int64_t>{2, 2}));
    EXPECT_EQ(attrs.get_string("padding"), "same");
    EXPECT_EQ(attrs.get_ints("dilations"), (std::vector<std::int64_t>{1, 1}));
  }
  EXPECT_TRUE(saw_input);
  EXPECT_TRUE(saw_filter);
}

// ---- errors ----
TEST(Conv2D, PaddingNamesRoundTrip) {
  EXPECT_STREQ(padding_name(Padding::same), "same");
  EXPECT_STREQ(padding_name(Padding::valid), "valid");
  EXPECT_EQ(parse_padding("same"), Padding::same);
  EXPECT_EQ(parse_padding("VALID"), Padding::valid);
  expect_invalid_argument([] { parse_padding("full"); }, {"\"full\"", "valid", "same"});
}

TEST(Conv2D, ErrorsNameTheProblem) {
  const Tensor x = Tensor::zeros({2, 5, 5, 3});
  const Tensor filter = Tensor::zeros({3, 3, 3, 4});
  expect_invalid_argument(
      [&] {
        conv2d(Tensor::zeros({5, 5, 3}), filter);
      },
      {"conv2d", "rank 4", "(5, 5, 3)"});
  expect_invalid_argument(
      [&] {
        conv2d(x, Tensor::zeros({3, 3, 3}));
      },
      {"conv2d", "filter", "(3, 3, 3)"});
  expect_invalid_argument(
      [&] {
        conv2d(x, Tensor::zeros({3, 3, 2, 4}));
      },
      {"conv2d", "(2, 5, 5, 3)", "3 channels", "(3, 3, 2, 4)"});
  expect_invalid_argument([&] { conv2d(x, filter, Tensor::zeros({3})); },
                          {"conv2d", "bias", "(4,)", "(3,)"});
  expect_invalid_argument(
      [&] {
        conv2d(x, Tensor::zeros({7, 3, 3, 4}));
      },
      {"conv2d", "7x3 window", "larger", "(2, 5, 5, 3)", "padding=same"});
  expect_invalid_argument(
      [&] {
        conv2d(x, filter, options({1, 1}, Padding::valid, {3, 1}));
      },
      {"conv2d", "dilated to 7x3", "larger"});
  EXPECT_EQ(conv2d(x, Tensor::zeros({7, 3, 3, 4}), options({1, 1}, Padding::same)).shape(),
            (Shape{2, 5, 5, 4}));
  expect_invalid_argument(
      [&] {
        conv2d(x, filter, options({0, 1}, Padding::valid));
      },
      {"conv2d", "strides", "positive", "[0, 1]"});
  expect_invalid_argument(
      [&] {
        conv2d(x, filter, options({1, 1}, Padding::valid, {1, -1}));
      },
      {"conv2d", "dilations", "positive"});
  expect_invalid_argument(
      [&] {
        conv2d(x, Tensor::zeros({3, 3, 3, 4}, DType::f64));
      },
      {"conv2d", "f32", "f64"});
  expect_invalid_argument(
      [&] {
        conv2d(Tensor::zeros({2, 5, 5, 3}, DType::i32), Tensor::zeros({3, 3, 3, 4}, DType::i32));
      },
      {"conv2d", "floating"});
  expect_invalid_argument(
      [&] {
        conv2d_backward_input(Tensor::zeros({2, 4, 4, 4}), filter, {2, 5, 5, 3});
      },
      {"conv2d_backward_input", "(2, 4, 4, 4)", "(2, 3, 3, 4)"});
  expect_invalid_argument(
      [&] {
        conv2d_backward_filter(x, Tensor::zeros({2, 3, 3, 5}), {3, 3, 3, 4}, true);
      },
      {"conv2d_backward_filter", "(2, 3, 3, 5)", "(2, 3, 3, 4)"});
}

}  // namespace
}  // namespace tandem
