// A compiled node's CPU kernel keeps its primitive and its arguments between runs
// (KernelContext::state). What it kept must follow the call: an input in another buffer, an
// output written somewhere else, a replaced weight, a residual written over. Each run here must
// give the bits of the same op called eagerly.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "ops/op_attrs.h"
#include "ops/op_table.h"
#include "tandem/ops.h"
#include "tandem/random.h"

namespace tandem {
namespace {

using K = OpKind;

Tensor random(const Shape& shape, std::uint64_t seed) {
  Generator generator(seed);
  return random_uniform(shape, -1.0, 1.0, DType::f32, generator);
}

Tensor constant(const Tensor& value) {
  Tensor result = value.clone();
  result.set_constant(true);
  return result;
}

// Runs `kind` on the CPU backend with the node slot `state`, into `out` (or a new buffer shaped
// as the eager result), and expects the eager call's bits. Every buffer a test gives stays alive
// until the test ends, so that a later run's tensors never reuse an earlier run's addresses (a
// kept argument that was not pointed again would go unseen there).
class KeptKernelState : public testing::Test {
 protected:
  void expect_kept_run_matches_eager(K kind, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                     std::unique_ptr<KernelState>& state, const std::string& label,
                                     Tensor out = Tensor()) {
    const Tensor expected = call_op(kind, inputs, attrs)[0];
    if (!out.defined()) out = Tensor::empty(expected.shape(), expected.dtype());
    std::vector<Tensor> outputs{out};
    backend_for(Device::cpu()).run(KernelContext{kind, inputs, outputs, attrs, &state});
    EXPECT_NE(state, nullptr) << label << ": the kernel kept nothing";
    EXPECT_EQ(outputs[0].to_vector<float>(), expected.to_vector<float>()) << label;
    alive_.insert(alive_.end(), inputs.begin(), inputs.end());
    alive_.push_back(out);
  }

 private:
  std::vector<Tensor> alive_;
};

Attrs convolution_attrs(Conv2DOptions options, bool relu, bool add = false) {
  Conv2DAttrs attrs;
  static_cast<Conv2DOptions&>(attrs) = options;
  attrs.fused_relu = relu;
  attrs.fused_add = add;
  return make_op_attrs<K::conv2d>(attrs);
}

TEST_F(KeptKernelState, ConvolutionFollowsMovedInputsOutputsAndWeights) {
  Conv2DOptions same;
  same.padding = Padding::same;
  const Attrs attrs = convolution_attrs(same, /*relu=*/true);
  const Tensor bias = random({32}, 3);
  std::unique_ptr<KernelState> state;
  Tensor filter = random({3, 3, 16, 32}, 2);  // a variable weight: read where it stands
  expect_kept_run_matches_eager(K::conv2d, {random({2, 9, 9, 16}, 1), filter, bias}, attrs, state,
                                "first run");
  expect_kept_run_matches_eager(K::conv2d, {random({2, 9, 9, 16}, 4), filter, bias}, attrs, state,
                                "input in another buffer");
  filter.set_data(random({3, 3, 16, 32}, 5));
  expect_kept_run_matches_eager(K::conv2d, {random({2, 9, 9, 16}, 4), filter, bias}, attrs, state,
                                "weight given new storage");
  const Tensor out = Tensor::empty({2, 9, 9, 32});
  expect_kept_run_matches_eager(K::conv2d, {random({2, 9, 9, 16}, 6), filter, bias}, attrs, state,
                                "output in another buffer", out);
}

TEST_F(KeptKernelState, ConvolutionFollowsAReplacedConstantFilter) {
  // A constant filter is reordered once and kept; another constant must be read instead. 7x7
  // positions take oneDNN's kernel, 4x4 ones the streamed loops where the CPU has AVX-512.
  for (const Shape& x_shape : {Shape{1, 7, 7, 64}, Shape{1, 4, 4, 64}}) {
    const std::string label = "x " + shape_str(x_shape);
    Conv2DOptions same;
    same.padding = Padding::same;
    const Attrs attrs = convolution_attrs(same, /*relu=*/false);
    std::unique_ptr<KernelState> state;
    const Tensor x = random(x_shape, 7);
    expect_kept_run_matches_eager(K::conv2d, {x, constant(random({3, 3, 64, 64}, 8))}, attrs, state,
                                  label + ", first constant");
    expect_kept_run_matches_eager(K::conv2d, {x, constant(random({3, 3, 64, 64}, 9))}, attrs, state,
                                  label + ", another constant");
    expect_kept_run_matches_eager(K::conv2d,
                                  {random(x_shape, 10), constant(random({3, 3, 64, 64}, 9))}, attrs,
                                  state, label + ", another input");
  }
}

TEST_F(KeptKernelState, StridedConvolutionUnrollsEachRunsInput) {
  // A strided 1x1 convolution reads its positions unrolled into a buffer the node keeps.
  Conv2DOptions strided;
  strided.strides = {2, 2};
  const Attrs attrs = convolution_attrs(strided, /*relu=*/true);
  for (const bool constant_filter : {false, true}) {
    const std::string label = constant_filter ? "constant filter" : "variable filter";
    const Tensor filter = random({1, 1, 32, 64}, 11);
    const Tensor kept_filter = constant_filter ? constant(filter) : filter;
    std::unique_ptr<KernelState> state;
    expect_kept_run_matches_eager(K::conv2d, {random({1, 8, 8, 32}, 12), kept_filter}, attrs, state,
                                  label + ", first input");
    expect_kept_run_matches_eager(K::conv2d, {random({1, 8, 8, 32}, 13), kept_filter}, attrs, state,
                                  label + ", second input");
  }
}

TEST_F(KeptKernelState, FusedResidualFollowsItsBuffer) {
  const Attrs attrs = convolution_attrs({}, /*relu=*/true, /*add=*/true);
  const Tensor x = random({1, 7, 7, 64}, 14);
  const Tensor filter = constant(random({1, 1, 64, 256}, 15));
  const Tensor bias = random({256}, 16);
  std::unique_ptr<KernelState> state;
  expect_kept_run_matches_eager(K::conv2d, {x, filter, bias, random({1, 7, 7, 256}, 17)}, attrs,
                                state, "residual in its own buffer");
  // Written over the residual, as a compiled graph does where the residual dies at this node
  // (another primitive: the residual already in the destination). Expected: the same call
  // without a slot.
  const Tensor residual = random({1, 7, 7, 256}, 18);
  std::vector<Tensor> written_buffers;  // alive to the end, as the fixture's
  const auto run_over_residual = [&](std::unique_ptr<KernelState>* slot) {
    const Tensor written = written_buffers.emplace_back(residual.clone());
    std::vector<Tensor> inputs{x, filter, bias, written};
    std::vector<Tensor> outputs{written};
    backend_for(Device::cpu()).run(KernelContext{K::conv2d, inputs, outputs, attrs, slot});
    return written.to_vector<float>();
  };
  EXPECT_EQ(run_over_residual(&state), run_over_residual(nullptr)) << "written over";
  EXPECT_EQ(run_over_residual(&state), run_over_residual(nullptr)) << "written over again";
  expect_kept_run_matches_eager(K::conv2d, {x, filter, bias, random({1, 7, 7, 256}, 19)}, attrs,
                                state, "residual in its own buffer again");
}

TEST_F(KeptKernelState, ProductFollowsMovedOperands) {
  const Attrs attrs = make_op_attrs<K::matmul>(MatmulAttrs{});
  const Tensor b = random({64, 48}, 20);
  const Tensor bias = random({48}, 21);
  std::unique_ptr<KernelState> state;
  expect_kept_run_matches_eager(K::matmul, {random({5, 64}, 22), b, bias}, attrs, state,
                                "first run");
  expect_kept_run_matches_eager(K::matmul, {random({5, 64}, 23), random({64, 48}, 24), bias}, attrs,
                                state, "both operands in other buffers");
}

TEST_F(KeptKernelState, AnotherKernelsStateIsReplaced) {
  // A slot holding another kernel's state (a node whose inputs changed kind) is remade.
  std::unique_ptr<KernelState> state;
  expect_kept_run_matches_eager(K::matmul, {random({5, 64}, 25), random({64, 48}, 26)},
                                make_op_attrs<K::matmul>(MatmulAttrs{}), state, "product");
  expect_kept_run_matches_eager(K::conv2d, {random({1, 7, 7, 64}, 27), random({1, 1, 64, 32}, 28)},
                                convolution_attrs({}, false), state, "convolution after it");
}

}  // namespace
}  // namespace tandem
