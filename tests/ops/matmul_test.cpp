#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

#include "ops/gradient_check.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::expect_gradients_match;
using testing::random_extent;
using testing::random_tensor;

// One case: a (batch..., M, K) x b (batch..., K, N) or a 2-D b, either stored transposed.
struct MatmulCase {
  Shape batch;
  std::int64_t m, k, n;
  bool transpose_a, transpose_b, b_batched, with_bias;

  Shape a_shape() const { return stored(batch, m, k, transpose_a); }
  Shape b_shape() const { return stored(b_batched ? batch : Shape{}, k, n, transpose_b); }
  static Shape stored(Shape shape, std::int64_t rows, std::int64_t cols, bool transposed) {
    shape.push_back(transposed ? cols : rows);
    shape.push_back(transposed ? rows : cols);
    return shape;
  }
  std::string str() const {
    return "batch " + shape_str(batch) + " M " + std::to_string(m) + " K " + std::to_string(k) +
           " N " + std::to_string(n) + (transpose_a ? " ta" : "") + (transpose_b ? " tb" : "") +
           (b_batched ? " batched b" : " 2-D b") + (with_bias ? " bias" : "");
  }
};

// The product written out from the definition, on logical indices, in double.
Tensor reference_matmul(const MatmulCase& mc, const Tensor& a, const Tensor& b,
                        const Tensor& bias) {
  const std::vector<double> av = a.to_vector<double>();
  const std::vector<double> bv = b.to_vector<double>();
  const std::vector<double> biasv = mc.with_bias ? bias.to_vector<double>() : std::vector<double>();
  const std::int64_t entries = shape_numel(mc.batch);
  std::vector<double> out;
  for (std::int64_t e = 0; e < entries; ++e) {
    const std::int64_t b_entry = mc.b_batched ? e : 0;
    for (std::int64_t i = 0; i < mc.m; ++i) {
      for (std::int64_t j = 0; j < mc.n; ++j) {
        double total = mc.with_bias ? biasv[j] : 0.0;
        for (std::int64_t p = 0; p < mc.k; ++p) {
          const double a_ip = mc.transpose_a ? av[e * mc.m * mc.k + p * mc.m + i]
                                             : av[e * mc.m * mc.k + i * mc.k + p];
          const double b_pj = mc.transpose_b ? bv[b_entry * mc.k * mc.n + j * mc.k + p]
                                             : bv[b_entry * mc.k * mc.n + p * mc.n + j];
          total += a_ip * b_pj;
        }
        out.push_back(total);
      }
    }
  }
  Shape shape = mc.batch;
  shape.push_back(mc.m);
  shape.push_back(mc.n);
  return Tensor::from_vector(out, shape);
}

Tensor run(const MatmulCase& mc, const Tensor& a, const Tensor& b, const Tensor& bias) {
  return mc.with_bias ? matmul(a, b, bias, mc.transpose_a, mc.transpose_b)
                      : matmul(a, b, mc.transpose_a, mc.transpose_b);
}

MatmulCase random_case(bool transpose_a, bool transpose_b, std::int64_t max_extent) {
  MatmulCase mc{};
  const int batch_rank = static_cast<int>(random_extent(0, 2));
  for (int i = 0; i < batch_rank; ++i)
    mc.batch.push_back(random_extent(1, 3));
  mc.m = random_extent(1, max_extent);
  mc.k = random_extent(1, max_extent);
  mc.n = random_extent(1, max_extent);
  mc.transpose_a = transpose_a;
  mc.transpose_b = transpose_b;
  mc.b_batched = batch_rank > 0 && random_extent(0, 1) == 1;
  mc.with_bias = random_extent(0, 1) == 1;
  return mc;
}

TEST(Matmul, HandDerivedValues) {
  // [[1, 2], [3, 4]] x [[5, 6], [7, 8]] = [[19, 22], [43, 50]]
  for (DType dtype : {DType::f32, DType::f64, DType::bf16, DType::f16, DType::i32, DType::i64}) {
    SCOPED_TRACE(dtype_name(dtype));
    const Tensor a = cast(Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2}), dtype);
    const Tensor b = cast(Tensor::from_vector<double>({5, 6, 7, 8}, {2, 2}), dtype);
    const Tensor bias = cast(Tensor::from_vector<double>({1, -1}, {2}), dtype);
    EXPECT_EQ(matmul(a, b).to_vector<double>(), (std::vector<double>{19, 22, 43, 50}));
    EXPECT_EQ(matmul(a, b, bias).to_vector<double>(), (std::vector<double>{20, 21, 44, 49}));
    // a^T b = [[1, 3], [2, 4]] x b = [[26, 30], [38, 44]]
    EXPECT_EQ(matmul(a, b, true, false).to_vector<double>(), (std::vector<double>{26, 30, 38, 44}));
    // a b^T = [[17, 23], [39, 53]]
    EXPECT_EQ(matmul(a, b, false, true).to_vector<double>(), (std::vector<double>{17, 23, 39, 53}));
    // a^T b^T = [[1, 3], [2, 4]] x [[5, 7], [6, 8]] = [[23, 31], [34, 46]]
    EXPECT_EQ(matmul(a, b, true, true).to_vector<double>(), (std::vector<double>{23, 31, 34, 46}));
  }
}

TEST(Matmul, ShapesOfBatchedAndSharedOperands) {
  EXPECT_EQ(matmul(Tensor::zeros({4, 2, 3}), Tensor::zeros({4, 3, 5})).shape(), (Shape{4, 2, 5}));
  EXPECT_EQ(matmul(Tensor::zeros({4, 6, 2, 3}), Tensor::zeros({3, 5})).shape(),
            (Shape{4, 6, 2, 5}));
  EXPECT_EQ(matmul(Tensor::zeros({4, 3, 2}), Tensor::zeros({5, 3}), true, true).shape(),
            (Shape{4, 2, 5}));
}

// Every path (oneDNN for f32/bf16, loops for the rest) against the definition, on random shapes
// covering transposes, batches, a shared 2-D b and the fused bias.
TEST(Matmul, EveryDTypeMatchesTheDefinition) {
  for (int trial = 0; trial < 6; ++trial) {
    for (bool transpose_a : {false, true}) {
      for (bool transpose_b : {false, true}) {
        const MatmulCase mc = random_case(transpose_a, transpose_b, 40);
        SCOPED_TRACE(mc.str());
        const Tensor a = random_tensor(mc.a_shape(), -1, 1, 0);
        const Tensor b = random_tensor(mc.b_shape(), -1, 1, 0);
        const Tensor bias = random_tensor({mc.n}, -1, 1, 0);
        const Tensor expected = reference_matmul(mc, a, b, bias);
        expect_close(run(mc, a, b, bias), expected, 1e-12, "f64");
        const auto as = [](const Tensor& t, DType dtype) { return cast(t, dtype); };
        const double k = static_cast<double>(mc.k);
        expect_close(run(mc, as(a, DType::f32), as(b, DType::f32), as(bias, DType::f32)), expected,
                     1e-6 * k, "f32");
        // 16-bit floats: inputs rounded to 8 (bf16) or 11 (f16) significant bits, f32 sums.
        const Tensor a_bf16 = as(a, DType::bf16), b_bf16 = as(b, DType::bf16);
        const Tensor bias_bf16 = as(bias, DType::bf16);
        const Tensor expected_bf16 = reference_matmul(mc, a_bf16, b_bf16, bias_bf16);
        expect_close(run(mc, a_bf16, b_bf16, bias_bf16), expected_bf16, 1e-2, "bf16");
        const Tensor a_f16 = as(a, DType::f16), b_f16 = as(b, DType::f16);
        const Tensor bias_f16 = as(bias, DType::f16);
        expect_close(run(mc, a_f16, b_f16, bias_f16), reference_matmul(mc, a_f16, b_f16, bias_f16),
                     2e-3, "f16");
      }
    }
  }
}

TEST(Matmul, IntegersAreExact) {
  const MatmulCase mc{{3}, 5, 7, 4, false, true, true, true};
  std::vector<std::int32_t> a_values, b_values;
  for (std::int64_t i = 0; i < shape_numel(mc.a_shape()); ++i)
    a_values.push_back(static_cast<int>(i % 11) - 5);
  for (std::int64_t i = 0; i < shape_numel(mc.b_shape()); ++i)
    b_values.push_back(static_cast<int>(i % 7) - 3);
  const Tensor a = Tensor::from_vector(a_values, mc.a_shape());
  const Tensor b = Tensor::from_vector(b_values, mc.b_shape());
  const Tensor bias = Tensor::from_vector<std::int32_t>({1, 2, 3, 4}, {4});
  const Tensor result = run(mc, a, b, bias);
  EXPECT_EQ(result.dtype(), DType::i32);
  EXPECT_EQ(result.to_vector<double>(), reference_matmul(mc, a, b, bias).to_vector<double>());
}

// The shapes of the main training job: Dense 1600 -> 64 and 64 -> 10 at several batch sizes,
// through the cached oneDNN primitives, called repeatedly.
TEST(Matmul, DenseLayerShapesRepeated) {
  for (std::int64_t batch : {32, 100, 128}) {
    for (auto [in, out] : {std::pair<std::int64_t, std::int64_t>{1600, 64}, {64, 10}}) {
      const MatmulCase mc{{}, batch, in, out, false, false, false, true};
      const Tensor x = random_tensor({batch, in}, -1, 1, 0);
      const Tensor w = random_tensor({in, out}, -0.1, 0.1, 0);
      const Tensor bias = random_tensor({out}, -1, 1, 0);
      const Tensor expected = reference_matmul(mc, x, w, bias);
      for (int repeat = 0; repeat < 3; ++repeat) {
        expect_close(matmul(cast(x, DType::f32), cast(w, DType::f32), cast(bias, DType::f32)),
                     expected, 1e-5);
      }
    }
  }
}

// Two threads share the cached primitives (the data loader's prefetch thread runs ops too).
TEST(Matmul, ConcurrentCallsFromTwoThreads) {
  const MatmulCase mc{{}, 64, 300, 48, false, true, false, true};
  const Tensor a = random_tensor(mc.a_shape(), -1, 1, 0, DType::f32);
  const Tensor b = random_tensor(mc.b_shape(), -1, 1, 0, DType::f32);
  const Tensor bias = random_tensor({mc.n}, -1, 1, 0, DType::f32);
  const std::vector<float> expected = run(mc, a, b, bias).to_vector<float>();
  std::atomic<int> mismatches{0};
  auto worker = [&] {
    for (int i = 0; i < 200; ++i) {
      if (run(mc, a, b, bias).to_vector<float>() != expected) ++mismatches;
    }
  };
  std::thread first(worker);
  std::thread second(worker);
  first.join();
  second.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(Matmul, EmptyInnerExtentGivesTheBias) {
  const Tensor bias = Tensor::from_vector<float>({1, 2, 3}, {3});
  const Tensor result = matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}), bias);
  EXPECT_EQ(result.to_vector<float>(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(matmul(Tensor::zeros({0, 4}), Tensor::zeros({4, 3})).shape(), (Shape{0, 3}));
}

TEST(Matmul, GradientsOfEveryLayout) {
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      for (int trial = 0; trial < 2; ++trial) {
        MatmulCase mc = random_case(transpose_a, transpose_b, 4);
        mc.b_batched = trial == 0 && !mc.batch.empty();
        SCOPED_TRACE(mc.str());
        std::vector<Tensor> inputs{random_tensor(mc.a_shape()), random_tensor(mc.b_shape())};
        if (mc.with_bias) inputs.push_back(random_tensor({mc.n}));
        expect_gradients_match(
            [mc](const auto& in) { return run(mc, in[0], in[1], mc.with_bias ? in[2] : Tensor()); },
            inputs, {}, mc.str());
      }
    }
  }
}

// A batched a against a shared 2-D b (a Dense layer on a sequence): b's gradient sums the batch.
TEST(Matmul, GradientOfSharedWeightsSumsTheBatch) {
  for (bool transpose_a : {false, true}) {
    for (bool transpose_b : {false, true}) {
      const MatmulCase mc{{2, 3}, 2, 3, 2, transpose_a, transpose_b, false, true};
      expect_gradients_match(
          [mc](const auto& in) { return run(mc, in[0], in[1], in[2]); },
          {random_tensor(mc.a_shape()), random_tensor(mc.b_shape()), random_tensor({mc.n})}, {},
          mc.str());
    }
  }
}

TEST(Matmul, SecondOrderGradient) {
  // d/da of sum((a b)^2 w) again through the tape: the gradient rule is made of matmuls.
  const Tensor a = random_tensor({3, 4});
  const Tensor b = random_tensor({4, 2});
  expect_gradients_match(
      [](const auto& in) {
        GradientTape tape;
        tape.watch(in[0]);
        const Tensor y = matmul(in[0], in[1]);
        const Tensor loss = sum(y * y);
        return tape.gradient(loss, {in[0]})[0];
      },
      {a, b});
}

TEST(Matmul, CostCountsMultiplyAdds) {
  const std::vector<TensorMeta> inputs{{{8, 32, 16}, DType::f32}, {{16, 64}, DType::f32}};
  const std::vector<TensorMeta> outputs{{{8, 32, 64}, DType::f32}};
  const Attrs attrs{
      {"transpose_a", false}, {"transpose_b", false}, {"fused_relu", false}, {"fused_add", false}};
  const OpCost cost = op_cost(OpKind::matmul, inputs, outputs, attrs);
  EXPECT_DOUBLE_EQ(cost.flops, 2.0 * 8 * 32 * 64 * 16);
  EXPECT_DOUBLE_EQ(cost.bytes, 4.0 * (8 * 32 * 16 + 16 * 64 + 8 * 32 * 64));
}

TEST(Matmul, ErrorsNameTheShapes) {
  const auto message_of = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const InvalidArgument& error) {
      return error.what();
    }
    return "no error";
  };
  const std::string inner = message_of([] {
    matmul(Tensor::zeros({32, 1600}), Tensor::zeros({1500, 64}));
  });
  EXPECT_NE(inner.find("(32, 1600)"), std::string::npos) << inner;
  EXPECT_NE(inner.find("(1500, 64)"), std::string::npos) << inner;
  EXPECT_THROW(matmul(Tensor::zeros({3}), Tensor::zeros({3, 2})), InvalidArgument);
  EXPECT_THROW(matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5})), InvalidArgument);
  EXPECT_THROW(matmul(Tensor::zeros({3, 4}), Tensor::zeros({2, 4, 5})), InvalidArgument);
  EXPECT_THROW(matmul(Tensor::zeros({3, 4}), Tensor::zeros({4, 5}), Tensor::zeros({4})),
               InvalidArgument);
  EXPECT_THROW(matmul(Tensor::zeros({3, 4}), Tensor::zeros({4, 5}, DType::f64)), InvalidArgument);
  EXPECT_THROW(matmul(Tensor::zeros({3, 4}, DType::boolean), Tensor::zeros({4, 5}, DType::boolean)),
               InvalidArgument);
}

}  // namespace
}  // namespace tandem
