// bf16 on the CPU (mixed_bfloat16 training): every op with an f32 CPU kernel has a bf16 one, and
// the bf16 results stay within bf16's precision of the f32 ones for the ops a model is made of.
#include <gtest/gtest.h>

#include "ops/backend.h"
#include "ops/gradient_check.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::random_tensor;

// The integer products are the exception: they quantise an f32 input by definition (their shape
// inference refuses any other), so they have no bf16 form to lack.
TEST(Bf16Kernels, EveryOpWithAnF32KernelHasABf16One) {
  for (int i = 0; i < kNumOps; ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (kind == OpKind::quantized_conv2d || kind == OpKind::quantized_matmul) continue;
    if (backend_for(Device::cpu()).supports(kind, DType::f32)) {
      EXPECT_TRUE(backend_for(Device::cpu()).supports(kind, DType::bf16)) << op_name(kind);
    }
  }
}

// A small convolutional and a small transformer step in bf16 against f32 on the same values.
TEST(Bf16Kernels, ModelOpsMatchF32WithinBf16Precision) {
  const Tensor images = random_tensor({2, 9, 9, 4}, -1, 1, 0, DType::f32);
  const Tensor filter = random_tensor({3, 3, 4, 8}, -0.5, 0.5, 0, DType::f32);
  const Tensor tokens = random_tensor({2, 5, 16}, -1, 1, 0, DType::f32);
  const Tensor weights = random_tensor({16, 16}, -0.3, 0.3, 0, DType::f32);
  const Tensor gamma = Tensor::ones({16});
  const Tensor beta = Tensor::zeros({16});
  auto network = [&](DType dtype) {
    const Tensor x = cast(images, dtype);
    Conv2DOptions same;
    same.padding = Padding::same;
    const Tensor conv = relu(conv2d(x, cast(filter, dtype), same));
    const Tensor pooled = global_avg_pool2d(max_pool2d(conv));
    const Tensor normed = batch_norm_training(conv, Tensor::ones({8}), Tensor::zeros({8}), 1e-3).y;
    const Tensor t = cast(tokens, dtype);
    const Tensor q = matmul(t, cast(weights, dtype));
    const Tensor attention = matmul(softmax(matmul(q, t, false, true), -1), t);
    const Tensor hidden = gelu(layer_norm(attention + t, gamma, beta, 1e-6).y);
    return std::vector<Tensor>{pooled, normed, hidden};
  };
  const std::vector<Tensor> reference = network(DType::f32);
  const std::vector<Tensor> low = network(DType::bf16);
  for (std::size_t i = 0; i < reference.size(); ++i) {
    EXPECT_EQ(low[i].dtype(), DType::bf16);
    expect_close(cast(low[i], DType::f32), reference[i], 5e-2, "output " + std::to_string(i));
  }
}

}  // namespace
}  // namespace tandem
