// bf16 on the CPU (mixed_bfloat16 training): every op with an f32 CPU kernel has a bf16 one, and
// the bf16 results stay within bf16's precision of the f32 ones for the ops a model is made of.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

#include "ops/backend.h"
#include "ops/gradient_check.h"
#include "support/thread_count.h"

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

// cast between f32 and bf16 (AVX-512 loops for whole vectors where the CPU has them, the element
// loop for the rest) gives the bits of bfloat16's own conversions: ties to even, NaNs kept quiet
// (signalling and negative ones too), infinities, overflow to infinity, denormals, signed zeros,
// and random bit patterns, at lengths around whole vectors and split across threads.
TEST(Bf16Kernels, CastsGiveTheBitsOfTheElementConversions) {
  std::vector<std::uint32_t> words{0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu,
                                   0x3F808000u, 0x3F818000u, 0x3F808001u, 0x7F7FFFFFu,
                                   0xFF7FFFFFu, 0x7F800000u, 0xFF800000u, 0x7F800001u,
                                   0x7FC00000u, 0xFFC12345u, 0x7FFFFFFFu, 0x3F800000u};
  std::uint32_t state = 12345;
  while (words.size() < 5000) {
    state = state * 1664525u + 1013904223u;
    words.push_back(state);
  }
  for (std::size_t length : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                             std::size_t{47}, std::size_t{70}, words.size()}) {
    std::vector<float> values;
    for (std::size_t i = 0; i < length; ++i)
      values.push_back(std::bit_cast<float>(words[i]));
    const Tensor f32 = Tensor::from_vector(values, {static_cast<std::int64_t>(length)});
    for (int threads : {1, 2}) {
      const testing::ScopedThreadCount scoped(threads);
      const Tensor bf16 = cast(f32, DType::bf16);
      const Tensor back = cast(bf16, DType::f32);
      const auto* bits = static_cast<const bfloat16*>(bf16.raw_data());
      const auto* widened = static_cast<const float*>(back.raw_data());
      for (std::size_t i = 0; i < length; ++i) {
        const bfloat16 expected(values[i]);
        ASSERT_EQ(bits[i].bits, expected.bits)
            << "element " << i << " of " << length << ", word 0x" << std::hex << words[i];
        ASSERT_EQ(std::bit_cast<std::uint32_t>(widened[i]),
                  std::bit_cast<std::uint32_t>(static_cast<float>(expected)))
            << "element " << i << " of " << length;
      }
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

// The products across result columns at and around the 16- and 64-column blocks of oneDNN's AMX
// kernel and across summed lengths at and around the 32-element blocks of AMX's bf16 tiles, with
// and without a bias and transposes, against f32 on the same bf16 values, on 8 threads whatever
// the CPU has: oneDNN 2.6's AMX kernel got products with 48 < N < 64 wrong with more than two
// threads (on the GPU machine's 16 cores, every K = 64 product of an earlier form of this test,
// with N = 55) and ran an illegal instruction for K = 63 with N = 80 from two threads on, so
// onednn_matmul_extents gives it whole 64-element blocks (bench/RESULTS.md, 2026-12-04 evening).
// The label says which shape and layout fail. The sums stay within f32 accumulation, so the only
// gap is the bf16 rounding of the result.
TEST(Bf16Kernels, ProductsMatchF32AcrossColumnsAndSummedLengths) {
  const testing::ScopedThreadCount eight_threads(8);
  // 35 rows: with N in whole blocks, the M at which K = 63 failed on 8 threads.
  for (const std::int64_t m : {35, 38}) {
    for (const std::int64_t n : {16, 48, 49, 55, 63, 64, 65, 80, 130}) {
      for (const std::int64_t k : {1, 31, 32, 33, 63, 64, 65, 256, 2048}) {
        for (const bool transpose_a : {false, true}) {
          for (const bool transpose_b : {false, true}) {
            const Tensor a16 =
                random_tensor(transpose_a ? Shape{k, m} : Shape{m, k}, -1, 1, 0, DType::bf16);
            const Tensor b16 =
                random_tensor(transpose_b ? Shape{n, k} : Shape{k, n}, -1, 1, 0, DType::bf16);
            const Tensor bias16 = random_tensor({n}, -1, 1, 0, DType::bf16);
            const Tensor a = cast(a16, DType::f32);
            const Tensor b = cast(b16, DType::f32);
            const std::string label =
                "M " + std::to_string(m) + ", N " + std::to_string(n) + ", K " + std::to_string(k) +
                (transpose_a ? ", a transposed" : "") + (transpose_b ? ", b transposed" : "");
            // Both sides divided by sqrt(K), the sums' growth, so one tolerance serves every K.
            const auto scaled = [&](const Tensor& product) {
              return cast(product, DType::f32) / std::sqrt(static_cast<double>(k));
            };
            expect_close(scaled(matmul(a16, b16, bias16, transpose_a, transpose_b)),
                         scaled(matmul(a, b, cast(bias16, DType::f32), transpose_a, transpose_b)),
                         1e-2, label + ", with a bias");
            expect_close(scaled(matmul(a16, b16, transpose_a, transpose_b)),
                         scaled(matmul(a, b, transpose_a, transpose_b)), 1e-2, label);
          }
        }
      }
    }
  }
}

// A strided 1x1 convolution's filter gradient is such a product (conv.cpp's
// FilterGradientProduct: summed over N * OH * OW rows, dy's C_out columns), on 8 threads against
// f32 on the same values: C_out at and inside the padded block, 100 and 63 summed rows.
TEST(Bf16Kernels, StridedPointwiseFilterGradientsMatchF32WithinThePaddedColumns) {
  const testing::ScopedThreadCount eight_threads(8);
  Conv2DOptions strided;
  strided.strides = {2, 2};
  struct Input {
    std::int64_t batch, side;
  };
  for (const Input input : {Input{4, 9}, Input{7, 5}}) {
    for (const std::int64_t out_c : {48, 55, 64}) {
      const std::int64_t out_side = (input.side + 1) / 2;
      const Tensor x16 = random_tensor({input.batch, input.side, input.side, 24}, -1, 1, 0,
                                       DType::bf16);  // (N, H, W, C_in)
      const Tensor dy16 = random_tensor({input.batch, out_side, out_side, out_c}, -1, 1, 0,
                                        DType::bf16);  // (N, OH, OW, C_out)
      const Shape filter_shape{1, 1, 24, out_c};
      const Tensor low = conv2d_backward_filter(x16, dy16, filter_shape, false, strided)[0];
      const Tensor reference = conv2d_backward_filter(cast(x16, DType::f32), cast(dy16, DType::f32),
                                                      filter_shape, false, strided)[0];
      // Both sides divided by the square root of the summed rows.
      const double rows = static_cast<double>(input.batch * out_side * out_side);
      expect_close(cast(low, DType::f32) / std::sqrt(rows), reference / std::sqrt(rows), 1e-2,
                   "C_out " + std::to_string(out_c) + ", " + std::to_string(input.batch) +
                       " images of " + std::to_string(input.side) + "x" +
                       std::to_string(input.side));
    }
  }
}

}  // namespace
}  // namespace tandem
