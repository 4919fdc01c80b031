// fused_elementwise (ops/fused.h): a chain run as one loop gives the bits of its ops run one by
// one, in every floating dtype, with inputs repeated along leading axes; bad programs and shapes
// are refused with messages naming what is wrong. pooled_conv2d_backward_filter gives the bits of
// its two ops, on the path that forms the gradient in bands and on the one that forms it whole;
// so does pooled_conv2d, whose winners give the filter gradient the same cells as the
// convolution's result does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ops/fused.h"
#include "ops/gradient_check.h"
#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "support/errors.h"

namespace tandem {
namespace {

using K = OpKind;
using testing::error_of;
using testing::random_tensor;

void expect_same_bits(const Tensor& actual, const Tensor& expected, const std::string& label) {
  ASSERT_EQ(actual.shape(), expected.shape()) << label;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << label;
  EXPECT_EQ(std::memcmp(actual.raw_data(), expected.raw_data(), actual.nbytes()), 0) << label;
}

// slots 0..3: x (R, C), bias (C,), y (R, C) in [1, 2], a scalar; instruction k makes slot 4 + k
const std::vector<FusedInstruction> kEveryInstruction{
    {K::add, 0, 1}, {K::relu, 4},        {K::relu_backward, 4, 0},
    {K::mul, 5, 6}, {K::sub, 7, 0},      {K::div, 8, 2},
    {K::abs, 9},    {K::sqrt, 10},       {K::square, 11},
    {K::neg, 12},   {K::maximum, 13, 0}, {K::minimum, 14, 1},
    {K::mul, 15, 3}};

Tensor one_by_one(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];
  const Tensor& bias = in[1];
  const Tensor& y = in[2];
  const Tensor shifted = add(x, bias);
  const Tensor product = mul(relu(shifted), relu_backward(shifted, x));
  const Tensor root = sqrt(abs(div(sub(product, x), y)));
  return mul(minimum(maximum(neg(square(root)), x), bias), in[3]);
}

// Large enough that the ops alone take oneDNN's kernels in f32 and bf16, and not a whole
// number of the fused loop's blocks.
TEST(FusedElementwise, GivesTheBitsOfItsOpsOneByOne) {
  for (const DType dtype : {DType::f32, DType::bf16, DType::f64, DType::f16}) {
    const Shape shape{97, 257};
    const std::vector<Tensor> in{
        random_tensor(shape, -1, 1, 0.1, dtype), random_tensor({shape[1]}, -1, 1, 0, dtype),
        random_tensor(shape, 1, 2, 0, dtype), random_tensor({}, -2, 2, 0.5, dtype)};
    const Tensor fused =
        call_op(K::fused_elementwise, in, fused_elementwise_attrs(kEveryInstruction))[0];
    expect_same_bits(fused, one_by_one(in), dtype_name(dtype));
  }
}

TEST(FusedElementwise, NamesItsChainAndCountsOneOperationPerInstruction) {
  EXPECT_EQ(fused_label({{K::add, 0, 1}, {K::relu, 2}}), "add+relu");
  const std::vector<TensorMeta> in{{{8, 4}, DType::f32}, {{4}, DType::f32}};
  const std::vector<TensorMeta> out{{{8, 4}, DType::f32}};
  const OpCost cost = op_cost(K::fused_elementwise, in, out,
                              fused_elementwise_attrs({{K::add, 0, 1}, {K::relu, 2}}));
  EXPECT_EQ(cost.flops, 64);
  EXPECT_EQ(cost.bytes, (32 + 4 + 32) * 4);  // the inputs and the output, once
}

TEST(FusedElementwise, RefusesBadProgramsAndShapes) {
  const Tensor x = random_tensor({3, 4}, -1, 1, 0, DType::f32);
  const auto run = [&](const std::vector<Tensor>& in, const std::vector<FusedInstruction>& p) {
    return error_of([&] { call_op(K::fused_elementwise, in, fused_elementwise_attrs(p)); });
  };
  std::string message = run({x}, {{K::exp, 0}});
  EXPECT_NE(message.find("instruction 0"), std::string::npos) << message;
  EXPECT_NE(message.find("not a correctly rounded element-wise op"), std::string::npos) << message;
  message = run({x}, {{K::add, 0, 1}});
  EXPECT_NE(message.find("instruction 0 (add): operand slots 0, 1"), std::string::npos) << message;
  EXPECT_NE(message.find("slots 0..0"), std::string::npos) << message;
  message = run({x}, {{K::relu, 0, 0}});
  EXPECT_NE(message.find("-1 for b"), std::string::npos) << message;
  message = run({x}, {});
  EXPECT_NE(message.find("1 to 16 instructions"), std::string::npos) << message;
  message = run({x, random_tensor({3, 1}, -1, 1, 0, DType::f32)}, {{K::add, 0, 1}});
  EXPECT_NE(message.find("input 1 (3, 1) is not the output's shape (3, 4)"), std::string::npos)
      << message;
  message = run({x, random_tensor({4}, -1, 1, 0, DType::f64)}, {{K::add, 0, 1}});
  EXPECT_NE(message.find("fused_elementwise"), std::string::npos) << message;
  EXPECT_NE(message.find("f64"), std::string::npos) << message;
}

TEST(FusedElementwise, InputsRepeatAlongLeadingAxesOnly) {
  EXPECT_TRUE(repeats_into({4}, {3, 4}));
  EXPECT_TRUE(repeats_into({}, {3, 4}));
  EXPECT_TRUE(repeats_into({1, 1, 4}, {3, 4}));
  EXPECT_TRUE(repeats_into({3, 4}, {3, 4}));
  EXPECT_FALSE(repeats_into({3, 1}, {3, 4}));
  EXPECT_FALSE(repeats_into({3}, {3, 4}));
  EXPECT_FALSE(repeats_into({2, 3, 4}, {3, 4}));
}

struct PooledCase {
  Shape x_shape;
  Shape filter_shape;
  Conv2DOptions conv;
  Pool2DOptions pool;
  bool relu_masked;
  DType dtype;
};

// conv2d_backward_filter(x, max_pool2d_backward(pooled_dy, y)) against the fused op, with and
// without the bias gradient; y takes both signs, so the relu mask matters.
void expect_pooled_gives_its_ops_bits(const PooledCase& c) {
  const std::string label = "x " + shape_str(c.x_shape) + ", filter " + shape_str(c.filter_shape) +
                            ", pool " + std::to_string(c.pool.window[0]) + "x" +
                            std::to_string(c.pool.window[1]) + " stride " +
                            std::to_string(c.pool.strides[0]) +
                            (c.relu_masked ? ", relu-masked, " : ", ") + dtype_name(c.dtype);
  const Tensor x = random_tensor(c.x_shape, -1, 1, 0, c.dtype);
  const Tensor y = conv2d(x, random_tensor(c.filter_shape, -1, 1, 0, c.dtype), c.conv);
  const Tensor pooled_dy = random_tensor(max_pool2d(y, c.pool).shape(), -1, 1, 0, c.dtype);
  MaxPool2DBackwardAttrs pool_attrs;
  static_cast<Pool2DOptions&>(pool_attrs) = c.pool;
  pool_attrs.relu_masked = c.relu_masked;
  const Attrs pool_gradient = make_op_attrs<K::max_pool2d_backward>(pool_attrs);
  const Tensor dy = call_op(K::max_pool2d_backward, {pooled_dy, y}, pool_gradient)[0];
  for (const bool with_bias : {true, false}) {
    Conv2DBackwardFilterAttrs filter_attrs;
    static_cast<Conv2DOptions&>(filter_attrs) = c.conv;
    filter_attrs.filter_shape = c.filter_shape;
    filter_attrs.with_bias = with_bias;
    const Attrs filter_gradient = make_op_attrs<K::conv2d_backward_filter>(filter_attrs);
    const std::vector<Tensor> expected =
        call_op(K::conv2d_backward_filter, {x, dy}, filter_gradient);
    const std::vector<Tensor> fused =
        call_op(K::pooled_conv2d_backward_filter, {x, pooled_dy, y},
                pooled_conv2d_backward_filter_attrs(pool_gradient, filter_gradient));
    ASSERT_EQ(fused.size(), expected.size()) << label;
    for (std::size_t i = 0; i < fused.size(); ++i) {
      expect_same_bits(fused[i], expected[i],
                       label + (i == 0 ? ", filter gradient" : ", bias gradient"));
    }
  }
}

TEST(PooledConv2DBackwardFilter, GivesTheBitsOfItsTwoOps) {
  const Pool2DOptions pool2x2{{2, 2}, {2, 2}, Padding::valid};
  const Pool2DOptions pool3x3{{3, 3}, {2, 2}, Padding::same};
  const std::vector<PooledCase> cases{
      // the main job's first layer (in bands on AVX-512 CPUs)
      {{2, 28, 28, 1}, {3, 3, 1, 32}, {}, pool2x2, true, DType::f32},
      {{2, 28, 28, 1}, {3, 3, 1, 32}, {}, pool2x2, false, DType::f32},
      // a row and a column no window covers, 40 channels, RGB over several passes
      {{3, 11, 9, 3}, {3, 3, 3, 40}, {{1, 1}, Padding::same}, pool2x2, true, DType::f32},
      // windows that overlap and a bf16 gradient: formed whole
      {{2, 9, 10, 1}, {3, 3, 1, 20}, {}, pool3x3, true, DType::f32},
      {{2, 12, 12, 1}, {3, 3, 1, 32}, {}, pool2x2, true, DType::bf16},
  };
  for (const PooledCase& c : cases) {
    expect_pooled_gives_its_ops_bits(c);
  }
}

TEST(PooledConv2DBackwardFilter, NamesItselfInShapeErrors) {
  const Tensor x = random_tensor({1, 6, 6, 1}, -1, 1, 0, DType::f32);
  const Tensor y = random_tensor({1, 4, 4, 8}, -1, 1, 0, DType::f32);
  const Tensor wrong_pooled = random_tensor({1, 3, 3, 8}, -1, 1, 0, DType::f32);
  Conv2DBackwardFilterAttrs filter_attrs;
  filter_attrs.filter_shape = {3, 3, 1, 8};
  const Attrs attrs =
      pooled_conv2d_backward_filter_attrs(make_op_attrs<K::max_pool2d_backward>({}),
                                          make_op_attrs<K::conv2d_backward_filter>(filter_attrs));
  const std::string message = error_of([&] {
    call_op(K::pooled_conv2d_backward_filter, {x, wrong_pooled, y}, attrs);
  });
  EXPECT_NE(message.find("pooled_conv2d_backward_filter"), std::string::npos) << message;
  EXPECT_NE(message.find("(1, 3, 3, 8)"), std::string::npos) << message;
}

struct PooledConvolutionCase {
  Shape x_shape;
  Shape filter_shape;
  Conv2DOptions conv;
  Pool2DOptions pool;
  bool relu;
  bool bias;
  DType dtype = DType::f32;
};

// pooled_conv2d against conv2d then max_pool2d, and its winners: the filter gradient from them
// against the one from the convolution's result (max_pool2d_backward's choice of cell), both
// with the bits of the ops one by one.
void expect_pooled_convolution_gives_its_ops_bits(const PooledConvolutionCase& c) {
  const std::string label = "x " + shape_str(c.x_shape) + ", filter " + shape_str(c.filter_shape) +
                            ", pool " + std::to_string(c.pool.window[0]) + "x" +
                            std::to_string(c.pool.window[1]) + " stride " +
                            std::to_string(c.pool.strides[0]) + (c.relu ? ", relu" : "") +
                            (c.bias ? ", bias, " : ", ") + dtype_name(c.dtype);
  std::vector<Tensor> inputs{random_tensor(c.x_shape, -1, 1, 0, c.dtype),
                             random_tensor(c.filter_shape, -1, 1, 0, c.dtype)};
  if (c.bias) inputs.push_back(random_tensor({c.filter_shape[3]}, -1, 1, 0, c.dtype));
  Conv2DAttrs conv_attrs;
  static_cast<Conv2DOptions&>(conv_attrs) = c.conv;
  conv_attrs.fused_relu = c.relu;
  const Attrs convolution = make_op_attrs<K::conv2d>(conv_attrs);
  const Attrs pooling = make_op_attrs<K::max_pool2d>(c.pool);
  const Tensor y = call_op(K::conv2d, inputs, convolution)[0];
  const Tensor pooled = call_op(K::max_pool2d, {y}, pooling)[0];
  const std::vector<Tensor> fused =
      call_op(K::pooled_conv2d, inputs, pooled_conv2d_attrs(convolution, pooling));
  ASSERT_EQ(fused.size(), 2u) << label;
  expect_same_bits(fused[0], pooled, label + ", pooled");
  ASSERT_EQ(fused[1].dtype(), DType::i8) << label;
  ASSERT_EQ(fused[1].shape(), pooled.shape()) << label;

  const Tensor pooled_dy = random_tensor(pooled.shape(), -1, 1, 0, c.dtype);
  MaxPool2DBackwardAttrs pool_attrs;
  static_cast<Pool2DOptions&>(pool_attrs) = c.pool;
  pool_attrs.relu_masked = c.relu;
  Conv2DBackwardFilterAttrs filter_attrs;
  static_cast<Conv2DOptions&>(filter_attrs) = c.conv;
  filter_attrs.filter_shape = c.filter_shape;
  filter_attrs.with_bias = true;
  const Attrs from_y =
      pooled_conv2d_backward_filter_attrs(make_op_attrs<K::max_pool2d_backward>(pool_attrs),
                                          make_op_attrs<K::conv2d_backward_filter>(filter_attrs));
  auto winners_attrs = op_attrs<K::pooled_conv2d_backward_filter>(from_y);
  winners_attrs.from_winners = true;
  const std::vector<Tensor> expected =
      call_op(K::pooled_conv2d_backward_filter, {inputs[0], pooled_dy, y}, from_y);
  const std::vector<Tensor> from_winners =
      call_op(K::pooled_conv2d_backward_filter, {inputs[0], pooled_dy, fused[1]},
              make_op_attrs<K::pooled_conv2d_backward_filter>(winners_attrs));
  ASSERT_EQ(from_winners.size(), expected.size()) << label;
  // Where windows overlap, a cell that wins several adds their gradients in another order.
  const bool overlapping =
      c.pool.strides[0] < c.pool.window[0] || c.pool.strides[1] < c.pool.window[1];
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const std::string what = label + (i == 0 ? ", filter gradient" : ", bias gradient");
    if (!overlapping) {
      expect_same_bits(from_winners[i], expected[i], what);
      continue;
    }
    const std::vector<float> actual = from_winners[i].to_vector<float>();
    const std::vector<float> wanted = expected[i].to_vector<float>();
    for (std::size_t k = 0; k < wanted.size(); ++k)
      EXPECT_NEAR(actual[k], wanted[k], 1e-5 * (1 + std::abs(wanted[k]))) << what << " at " << k;
  }
}

TEST(PooledConv2D, GivesTheBitsOfItsTwoOpsAndItsWinnersTheGradientsCells) {
  const Pool2DOptions pool2x2{{2, 2}, {2, 2}, Padding::valid};
  const Pool2DOptions pool3x3{{3, 3}, {2, 2}, Padding::same};
  const std::vector<PooledConvolutionCase> cases{
      // the main job's first layer (pooled in bands on AVX-512 CPUs), with relu and without
      {{2, 28, 28, 1}, {3, 3, 1, 32}, {}, pool2x2, true, true},
      {{2, 28, 28, 1}, {3, 3, 1, 32}, {}, pool2x2, false, true},
      // 20 channels (a partial vector), a row and a column no window covers, no bias
      {{3, 11, 9, 1}, {3, 3, 1, 20}, {{1, 1}, Padding::same}, pool2x2, true, false},
      // 3x3 windows of stride 3 (disjoint, not 2x2)
      {{2, 12, 12, 1}, {3, 3, 1, 8}, {}, Pool2DOptions{{3, 3}, {3, 3}, Padding::valid}, true, true},
      // windows that overlap (the gradient within rounding) and are clipped at the edges
      {{2, 9, 10, 1}, {3, 3, 1, 8}, {}, pool3x3, true, true},
      // RGB: 27 window entries, the convolution formed whole
      {{2, 10, 12, 3}, {3, 3, 3, 16}, {}, pool2x2, true, true},
      // bf16: formed whole
      {{2, 12, 12, 1}, {3, 3, 1, 32}, {}, pool2x2, true, true, DType::bf16},
  };
  for (const PooledConvolutionCase& c : cases) {
    expect_pooled_convolution_gives_its_ops_bits(c);
  }
}

// The winners themselves, on a 1x1 convolution that passes x through: the first of equal maxima
// in scan order, and -1 with the relu where the maximum is not positive.
TEST(PooledConv2D, WinnersNameTheFirstMaximumAndNoneWhereTheReluZeroedIt) {
  const Tensor x = Tensor::from_vector<float>({1, 3, 0, -1,   //
                                               3, 2, -2, -3,  //
                                               5, 5, 0, 0,    //
                                               5, 4, 0, -4},
                                              {1, 4, 4, 1});
  const Tensor identity = Tensor::from_vector<float>({1}, {1, 1, 1, 1});
  for (const bool relu : {true, false}) {
    Conv2DAttrs conv_attrs;
    conv_attrs.fused_relu = relu;
    const std::vector<Tensor> out =
        call_op(K::pooled_conv2d, {x, identity},
                pooled_conv2d_attrs(make_op_attrs<K::conv2d>(conv_attrs),
                                    make_op_attrs<K::max_pool2d>(Pool2DOptions{})));
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{3, 0, 5, 0}));
    const std::vector<std::int8_t> expected =
        relu ? std::vector<std::int8_t>{1, -1, 0, -1} : std::vector<std::int8_t>{1, 0, 0, 0};
    EXPECT_EQ(out[1].to_vector<std::int8_t>(), expected) << (relu ? "relu" : "no relu");
  }
}

TEST(PooledConv2D, NamesItselfInErrors) {
  const Tensor x = random_tensor({1, 14, 14, 1}, -1, 1, 0, DType::f32);
  const Tensor filter = random_tensor({3, 3, 1, 8}, -1, 1, 0, DType::f32);
  const std::string window = error_of([&] {
    call_op(K::pooled_conv2d, {x, filter},
            pooled_conv2d_attrs(make_op_attrs<K::conv2d>({}),
                                make_op_attrs<K::max_pool2d>(Pool2DOptions{{12, 12}, {12, 12}})));
  });
  EXPECT_NE(window.find("pooled_conv2d"), std::string::npos) << window;
  EXPECT_NE(window.find("max_pool2d instead"), std::string::npos) << window;

  Conv2DBackwardFilterAttrs filter_attrs;
  filter_attrs.filter_shape = {3, 3, 1, 8};
  auto attrs = op_attrs<K::pooled_conv2d_backward_filter>(
      pooled_conv2d_backward_filter_attrs(make_op_attrs<K::max_pool2d_backward>({}),
                                          make_op_attrs<K::conv2d_backward_filter>(filter_attrs)));
  attrs.from_winners = true;
  const Tensor pooled_dy = random_tensor({1, 6, 6, 8}, -1, 1, 0, DType::f32);
  const std::string winners = error_of([&] {
    call_op(K::pooled_conv2d_backward_filter, {x, pooled_dy, pooled_dy},
            make_op_attrs<K::pooled_conv2d_backward_filter>(attrs));
  });
  EXPECT_NE(winners.find("pooled_conv2d_backward_filter"), std::string::npos) << winners;
  EXPECT_NE(winners.find("winners (1, 6, 6, 8) f32"), std::string::npos) << winners;
  EXPECT_NE(winners.find("i8"), std::string::npos) << winners;
}

}  // namespace
}  // namespace tandem
