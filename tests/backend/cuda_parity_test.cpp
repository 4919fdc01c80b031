// The CUDA backend against the CPU reference: every op of the table, forward, and for the
// differentiable ones the gradients the tape takes through them. Inputs are drawn once on the
// host; the reference runs on the CPU in f32 on the same values (rounded to bf16 first for the
// bf16 runs). Errors are measured per tensor, max |cuda - cpu| / max(1, max |cpu|):
//   f32 with TF32 off (IEEE products): under 1e-5;
//   f32 with TF32 on (matmul, convolution): under 1e-2, TF32's 10-bit mantissa;
//   bf16: under 1e-2.
// The parity tests run where a GPU is usable; elsewhere they skip with the backend's reason.
// EveryOpHasACudaParityCase runs everywhere: a new op without a case fails it.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "ops/gradient_check.h"
#include "ops/op_table.h"
#include "tandem/cuda.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::random_extent;

Tensor random_f32(const Shape& shape, double low = -2, double high = 2,
                  double min_magnitude = 0.05) {
  return testing::random_tensor(shape, low, high, min_magnitude, DType::f32);
}

Tensor ids(const std::vector<std::int64_t>& values, DType dtype = DType::i64) {
  return cast(Tensor::from_vector(values, {static_cast<std::int64_t>(values.size())}), dtype);
}

struct Case {
  std::vector<Tensor> inputs;  // host tensors: f32 for the floating ones
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
  bool gradients = true;   // compare the gradients of the first output too
  bool bf16 = true;        // also run with the floating inputs in bf16
  bool uses_tf32 = false;  // matmul/convolution: checked with TF32 on as well
};

using Run = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

Case unary(Tensor (*fn)(const Tensor&), double low = -2, double high = 2) {
  return {{random_f32({3, 17, 5}, low, high)},
          [fn](const auto& in) { return std::vector{fn(in[0])}; }};
}

template <typename Fn>
Case binary(Fn fn, double low = -2, double high = 2) {
  return {{random_f32({4, 9, 6}, low, high), random_f32({9, 1}, low, high)},
          [fn](const auto& in) { return std::vector{fn(in[0], in[1])}; }};
}

template <typename Fn>
Case comparison(Fn fn) {
  // Few distinct values, so equal and greater_equal see ties.
  const Tensor a = cast(cast(random_f32({5, 7}, -3, 3, 0), DType::i32), DType::f32);
  const Tensor b = cast(cast(random_f32({7}, -3, 3, 0), DType::i32), DType::f32);
  return {{a, b}, [fn](const auto& in) { return std::vector{fn(in[0], in[1])}; }, false};
}

std::map<OpKind, Case> parity_cases() {
  using K = OpKind;
  std::map<OpKind, Case> cases;
  cases[K::neg] = unary(neg);
  cases[K::abs] = unary(abs);
  cases[K::sign] = {
      {random_f32({64})}, [](const auto& in) { return std::vector{sign(in[0])}; }, false};
  cases[K::exp] = unary(exp);
  cases[K::log] = unary(log, 0.2, 3);
  cases[K::sqrt] = unary(sqrt, 0.2, 3);
  cases[K::rsqrt] = unary(rsqrt, 0.2, 3);
  cases[K::square] = unary(square);
  cases[K::relu] = unary(relu);
  cases[K::gelu] = {{random_f32({7, 33})}, [](const auto& in) {
                      return std::vector{gelu(in[0], false), gelu(in[0], true)};
                    }};
  cases[K::sigmoid] = unary(sigmoid);
  cases[K::tanh] = unary(tanh);
  const Shape pair{6, 40};
  cases[K::relu_backward] = {{random_f32(pair), random_f32(pair)}, [](const auto& in) {
                               return std::vector{relu_backward(in[0], in[1])};
                             }};
  cases[K::gelu_backward] = {
      {random_f32(pair), random_f32(pair)},
      [](const auto& in) {
        return std::vector{gelu_backward(in[0], in[1], false), gelu_backward(in[0], in[1], true)};
      },
      false};
  cases[K::sigmoid_backward] = {{random_f32(pair), random_f32(pair, 0.1, 0.9)}, [](const auto& in) {
                                  return std::vector{sigmoid_backward(in[0], in[1])};
                                }};
  cases[K::tanh_backward] = {{random_f32(pair), random_f32(pair, -0.9, 0.9)}, [](const auto& in) {
                               return std::vector{tanh_backward(in[0], in[1])};
                             }};
  cases[K::add] = binary([](auto& a, auto& b) { return add(a, b); });
  cases[K::sub] = binary([](auto& a, auto& b) { return sub(a, b); });
  cases[K::mul] = binary([](auto& a, auto& b) { return mul(a, b); });
  cases[K::div] = binary([](auto& a, auto& b) { return div(a, b); }, 0.3, 2);
  cases[K::maximum] = binary([](auto& a, auto& b) { return maximum(a, b); });
  cases[K::minimum] = binary([](auto& a, auto& b) { return minimum(a, b); });
  cases[K::pow] = binary([](auto& a, auto& b) { return pow(a, b); }, 0.3, 2);
  cases[K::equal] = comparison([](auto& a, auto& b) { return equal(a, b); });
  cases[K::greater] = comparison([](auto& a, auto& b) { return greater(a, b); });
  cases[K::greater_equal] = comparison([](auto& a, auto& b) { return greater_equal(a, b); });
  cases[K::less] = comparison([](auto& a, auto& b) { return less(a, b); });
  cases[K::select] = {
      {random_f32({5, 8}), random_f32({8}), random_f32({5, 1})},
      [](const auto& in) { return std::vector{where(greater(in[0], in[2]), in[0], in[1])}; }};
  const Tensor big = random_f32({6, 130, 70});
  cases[K::sum] = {
      {big}, [](const auto& in) {
        return std::vector{sum(in[0]), sum(in[0], {0, 2}), sum(in[0], {1}, true), sum(in[0], {-1})};
      }};
  cases[K::mean] = {{big}, [](const auto& in) {
                      return std::vector{mean(in[0], {0}), mean(in[0], {1, 2}), mean(in[0])};
                    }};
  cases[K::max] = {{big}, [](const auto& in) {
                     return std::vector{reduce_max(in[0], {-1}), reduce_max(in[0], {0, 1})};
                   }};
  cases[K::argmax] = {{big},
                      [](const auto& in) {
                        return std::vector{argmax(in[0], -1), argmax(in[0], 1)};
                      },
                      false};
  cases[K::broadcast_to] = {{random_f32({3, 1, 4})}, [](const auto& in) {
                              return std::vector{broadcast_to(in[0], {2, 3, 5, 4})};
                            }};
  const Tensor token_ids = ids({7, 0, 3, 7, 7, 2, 9, 1}, DType::i32);
  cases[K::gather] = {{random_f32({10, 6}), token_ids}, [](const auto& in) {
                        return std::vector{gather(in[0], reshape(in[1], {2, 4}))};
                      }};
  cases[K::scatter_add] = {{random_f32({8, 5}), token_ids}, [](const auto& in) {
                             return std::vector{scatter_add(in[0], in[1], 10)};
                           }};
  cases[K::matmul] = {{random_f32({3, 37, 64}), random_f32({64, 45}), random_f32({45}),
                       random_f32({3, 45, 64}), random_f32({3, 64, 37})},
                      [](const auto& in) {
                        return std::vector{matmul(in[0], in[1], in[2]),         // bias, 2-D b
                                           matmul(in[0], in[3], false, true),   // batched, b^T
                                           matmul(in[4], in[1], true, false)};  // a^T
                      },
                      true,
                      true,
                      true};
  Conv2DOptions same_stride2;
  same_stride2.strides = {2, 2};
  same_stride2.padding = Padding::same;  // pads one more cell after than before
  Conv2DOptions dilated;
  dilated.dilations = {2, 1};
  cases[K::conv2d] = {{random_f32({2, 15, 14, 8}), random_f32({3, 3, 8, 16}), random_f32({16})},
                      [same_stride2, dilated](const auto& in) {
                        return std::vector{conv2d(in[0], in[1], in[2], same_stride2),
                                           conv2d(in[0], in[1], dilated)};
                      },
                      true,
                      true,
                      true};
  cases[K::conv2d_backward_input] = {
      {random_f32({2, 8, 7, 16}), random_f32({3, 3, 8, 16})},
      [same_stride2](const auto& in) {
        return std::vector{conv2d_backward_input(in[0], in[1], {2, 15, 14, 8}, same_stride2)};
      },
      false,
      true,
      true};
  cases[K::conv2d_backward_filter] = {
      {random_f32({2, 15, 14, 8}), random_f32({2, 8, 7, 16})},
      [same_stride2](const auto& in) {
        return conv2d_backward_filter(in[0], in[1], {3, 3, 8, 16}, true, same_stride2);
      },
      false,
      true,
      true};
  const Pool2DOptions pool{{3, 3}, {2, 2}, Padding::same};
  const Tensor images = random_f32({2, 11, 10, 5});
  cases[K::max_pool2d] = {{images},
                          [pool](const auto& in) { return std::vector{max_pool2d(in[0], pool)}; }};
  cases[K::avg_pool2d] = {{images},
                          [pool](const auto& in) { return std::vector{avg_pool2d(in[0], pool)}; }};
  cases[K::max_pool2d_backward] = {
      {random_f32({2, 6, 5, 5}), images},
      [pool](const auto& in) { return std::vector{max_pool2d_backward(in[0], in[1], pool)}; },
      false};
  cases[K::avg_pool2d_backward] = {
      {random_f32({2, 6, 5, 5})},
      [pool](const auto& in) {
        return std::vector{avg_pool2d_backward(in[0], {2, 11, 10, 5}, pool)};
      },
      false};
  cases[K::global_avg_pool2d] = {
      {images}, [](const auto& in) { return std::vector{global_avg_pool2d(in[0])}; }};
  const Tensor activations = random_f32({4, 7, 6, 24}, -1, 3);
  cases[K::batch_norm] = {
      {activations, random_f32({24}), random_f32({24})}, [](const auto& in) {
        const BatchNormTrainingResult training = batch_norm_training(in[0], in[1], in[2], 1e-3);
        return std::vector{training.y, training.mean, training.variance,
                           batch_norm_inference(in[0], in[1], in[2], training.mean,
                                                training.variance + 0.5, 1e-3)};
      }};
  cases[K::batch_norm_backward] = {{random_f32({4, 7, 6, 24}), activations, random_f32({24}),
                                    random_f32({24}), random_f32({24}, 0.5, 2)},
                                   [](const auto& in) {
                                     std::vector<Tensor> result = batch_norm_backward(
                                         in[0], in[1], in[2], in[3], in[4], 1e-3, true);
                                     for (const Tensor& inference : batch_norm_backward(
                                              in[0], in[1], in[2], in[3], in[4], 1e-3, false)) {
                                       result.push_back(inference);
                                     }
                                     return result;
                                   },
                                   false};
  const Tensor sequence = random_f32({3, 5, 48});
  cases[K::layer_norm] = {{sequence, random_f32({48}), random_f32({48})}, [](const auto& in) {
                            const LayerNormResult result = layer_norm(in[0], in[1], in[2], 1e-5);
                            return std::vector{result.y, result.mean, result.rstd};
                          }};
  cases[K::layer_norm_backward] = {
      {random_f32({3, 5, 48}), sequence, random_f32({48})},
      [](const auto& in) {
        const LayerNormResult forward = layer_norm(in[1], in[2], in[2], 1e-5);
        return layer_norm_backward(in[0], in[1], in[2], forward.mean, forward.rstd);
      },
      false};
  const Tensor scores = random_f32({4, 6, 37});
  cases[K::softmax] = {{scores}, [](const auto& in) {
                         return std::vector{softmax(in[0], -1), softmax(in[0], 1)};
                       }};
  cases[K::log_softmax] = {{scores}, [](const auto& in) {
                             return std::vector{log_softmax(in[0], -1), log_softmax(in[0], 1)};
                           }};
  cases[K::softmax_backward] = {{random_f32({4, 6, 37}), scores},
                                [](const auto& in) {
                                  const Tensor y = softmax(in[1], -1);
                                  return std::vector{softmax_backward(in[0], y, -1)};
                                },
                                false};
  cases[K::log_softmax_backward] = {{random_f32({4, 6, 37}), scores},
                                    [](const auto& in) {
                                      const Tensor y = log_softmax(in[1], 1);
                                      return std::vector{log_softmax_backward(in[0], y, 1)};
                                    },
                                    false};
  cases[K::reshape] = {{random_f32({4, 6})}, [](const auto& in) {
                         return std::vector{reshape(in[0], {3, 8}) * 2.0};
                       }};
  cases[K::transpose] = {{random_f32({3, 4, 5, 2})}, [](const auto& in) {
                           return std::vector{transpose(in[0], {2, 0, 3, 1})};
                         }};
  cases[K::concat] = {{random_f32({3, 4, 5}), random_f32({3, 2, 5})}, [](const auto& in) {
                        return std::vector{concat({in[0], in[1], in[0]}, 1)};
                      }};
  cases[K::slice] = {{random_f32({5, 6, 7})}, [](const auto& in) {
                       return std::vector{slice(in[0], {1, 2, 0}, {3, -1, 4})};
                     }};
  cases[K::pad] = {{random_f32({3, 4})}, [](const auto& in) {
                     return std::vector{pad(in[0], {{{1, 2}}, {{0, 3}}}, 0.5)};
                   }};
  cases[K::cast] = {{random_f32({40}, -100, 100)}, [](const auto& in) {
                      return std::vector{cast(in[0], DType::f16), cast(in[0], DType::i32),
                                         cast(cast(in[0], DType::i64), DType::f32),
                                         cast(greater(in[0], scalar_like(in[0], 0.0)), DType::f32)};
                    }};
  cases[K::dropout] = {{random_f32({17, 33})}, [](const auto& in) {
                         Generator generator(99);
                         const DropoutResult result = dropout(in[0], 0.3, generator);
                         return std::vector{result.y, result.mask};
                       }};
  cases[K::sparse_softmax_cross_entropy] = {
      {random_f32({9, 11}), ids({0, 10, 3, 3, 7, 1, 2, 9, 5}, DType::i32)}, [](const auto& in) {
        const CrossEntropyResult result = sparse_softmax_cross_entropy_with_logits(in[0], in[1]);
        return std::vector{result.loss, result.backprop};
      }};
  cases[K::sgd_update] = {{random_f32({50}), random_f32({50}), random_f32({50})},
                          [](const auto& in) {
                            Tensor param = in[0].clone();
                            Tensor velocity = in[2].clone();
                            sgd_update(param, in[1], velocity, {0.1, 0.9, true, 0.01});
                            return std::vector{param, velocity};
                          },
                          false};
  cases[K::adam_update] = {
      {random_f32({50}), random_f32({50}), random_f32({50}), random_f32({50}, 0.1, 1)},
      [](const auto& in) {
        Tensor param = in[0].clone();
        Tensor m = in[2].clone();
        Tensor v = in[3].clone();
        adam_update(param, in[1], m, v, 3, {1e-2, 0.9, 0.999, 1e-7, 0.01});
        return std::vector{param, m, v};
      },
      false};
  return cases;
}

// max |actual - expected| / max(1, max |expected|)
double tensor_error(const Tensor& actual, const Tensor& expected) {
  EXPECT_EQ(actual.shape(), expected.shape());
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> b = expected.to_vector<double>();
  double largest = 1.0;
  double error = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    largest = std::max(largest, std::abs(b[i]));
    error = std::max(error, std::abs(a[i] - b[i]));
  }
  return error / largest;
}

struct Result {
  std::vector<Tensor> outputs;    // on the host
  std::vector<Tensor> gradients;  // of the floating inputs, on the host
};

// Runs a case on `device` with its floating inputs in `dtype` (rounded through `dtype` first and
// computed in f32 on the CPU reference, so both start from the same values).
Result evaluate(const Case& c, Device device, DType dtype, bool reference) {
  std::vector<Tensor> inputs;
  for (const Tensor& input : c.inputs) {
    Tensor value = input;
    if (is_floating(input.dtype())) {
      value = cast(input, dtype);
      if (reference) value = cast(value, DType::f32);
    }
    inputs.push_back(value.to(device));
  }
  Result result;
  GradientTape tape;
  for (const Tensor& input : inputs) {
    if (is_floating(input.dtype())) tape.watch(input);
  }
  const std::vector<Tensor> outputs = c.run(inputs);
  if (c.gradients) {
    // A fixed pseudo-random weighting, the same on both devices.
    const Tensor& first = outputs.front();
    std::vector<float> weights(static_cast<std::size_t>(first.numel()));
    for (std::size_t i = 0; i < weights.size(); ++i)
      weights[i] = uniform_from_bits(philox_word(7, 0, i)) - 0.5f;
    const Tensor weighting = Tensor::from_vector(weights, first.shape(), device);
    const Tensor loss = sum(cast(first, DType::f32) * weighting);
    std::vector<Tensor> floating;
    for (const Tensor& input : inputs) {
      if (is_floating(input.dtype())) floating.push_back(input);
    }
    for (const Tensor& gradient : tape.gradient(loss, floating, {}, /*unconnected_zero=*/true)) {
      result.gradients.push_back(cast(gradient, DType::f32).to(Device::cpu()));
    }
  }
  for (const Tensor& output : outputs) {
    const Tensor host = output.to(Device::cpu());
    result.outputs.push_back(is_floating(host.dtype()) ? cast(host, DType::f32) : host);
  }
  return result;
}

void expect_parity(const std::string& op, const Case& c, DType dtype, bool tf32, double tolerance) {
  cuda::set_tf32_enabled(tf32);
  const Result expected = evaluate(c, Device::cpu(), dtype, true);
  const Result actual = evaluate(c, Device::cuda(), dtype, false);
  const std::string label = op + " " + dtype_name(dtype) + (tf32 ? " (TF32)" : "");
  ASSERT_EQ(actual.outputs.size(), expected.outputs.size()) << label;
  for (std::size_t i = 0; i < expected.outputs.size(); ++i) {
    EXPECT_EQ(actual.outputs[i].dtype(), expected.outputs[i].dtype()) << label << " output " << i;
    EXPECT_LE(tensor_error(actual.outputs[i], expected.outputs[i]), tolerance)
        << label << " output " << i;
  }
  ASSERT_EQ(actual.gradients.size(), expected.gradients.size()) << label;
  for (std::size_t i = 0; i < expected.gradients.size(); ++i) {
    EXPECT_LE(tensor_error(actual.gradients[i], expected.gradients[i]), tolerance)
        << label << " gradient of input " << i;
  }
}

// Skips the calling test, with the backend's reason, where no GPU is usable.
#define TANDEM_REQUIRE_GPU()                                                               \
  do {                                                                                     \
    if (!cuda::is_available()) GTEST_SKIP() << "no usable GPU: " << cuda::status().reason; \
  } while (0)

TEST(CudaParity, EveryOpHasACudaParityCase) {
  const std::map<OpKind, Case> cases = parity_cases();
  for (int i = 0; i < kNumOps; ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (op_is_defined(kind) && !cases.contains(kind)) {
      ADD_FAILURE() << "op " << op_name(kind) << " has no CUDA parity case";
    }
  }
}

// The cases themselves are well-formed wherever the tests run: each runs on the CPU in f32 and,
// where the GPU runs it in bf16, in bf16 too, gradients included.
TEST(CudaParity, EveryCaseRunsOnTheCpu) {
  for (const auto& [kind, c] : parity_cases()) {
    SCOPED_TRACE(op_name(kind));
    EXPECT_NO_THROW(evaluate(c, Device::cpu(), DType::f32, false));
    if (c.bf16) EXPECT_NO_THROW(evaluate(c, Device::cpu(), DType::bf16, false));
  }
}

TEST(CudaParity, EveryOpMatchesTheCpuInF32) {
  TANDEM_REQUIRE_GPU();
  for (const auto& [kind, c] : parity_cases()) {
    SCOPED_TRACE(op_name(kind));
    expect_parity(op_name(kind), c, DType::f32, false, 1e-5);
  }
  cuda::set_tf32_enabled(true);
}

TEST(CudaParity, MatmulAndConvolutionMatchWithTf32) {
  TANDEM_REQUIRE_GPU();
  for (const auto& [kind, c] : parity_cases()) {
    if (!c.uses_tf32) continue;
    SCOPED_TRACE(op_name(kind));
    expect_parity(op_name(kind), c, DType::f32, true, 1e-2);
  }
}

TEST(CudaParity, EveryOpMatchesTheCpuInBf16) {
  TANDEM_REQUIRE_GPU();
  for (const auto& [kind, c] : parity_cases()) {
    if (!c.bf16) continue;
    SCOPED_TRACE(op_name(kind));
    expect_parity(op_name(kind), c, DType::bf16, true, 1e-2);
  }
}

TEST(CudaParity, BadLabelsAndIdsAreReportedAsOnTheCpu) {
  TANDEM_REQUIRE_GPU();
  const Tensor logits = Tensor::zeros({2, 3}, DType::f32, Device::cuda());
  const Tensor labels = Tensor::from_vector<std::int32_t>({1, 5}, {2}, Device::cuda());
  try {
    sparse_softmax_cross_entropy_with_logits(logits, labels);
    FAIL() << "label 5 of 3 classes was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("label 5 of example 1"), std::string::npos)
        << error.what();
  }
  const Tensor table = Tensor::zeros({4, 2}, DType::f32, Device::cuda());
  EXPECT_THROW(gather(table, Tensor::from_vector<std::int64_t>({0, 4}, {2}, Device::cuda())),
               InvalidArgument);
}

TEST(CudaParity, OutOfMemoryNamesTheDevice) {
  TANDEM_REQUIRE_GPU();
  const std::size_t held = memory_info(Device::cuda()).held;
  set_memory_limit(Device::cuda(), held + (1u << 20));
  try {
    Tensor::empty({1 << 20}, DType::f32, Device::cuda());
    set_memory_limit(Device::cuda(), 0);
    FAIL() << "4 MiB fitted under a 1 MiB limit";
  } catch (const OutOfMemory& error) {
    set_memory_limit(Device::cuda(), 0);
    EXPECT_EQ(error.device(), "cuda:0");
  }
  // The device itself refusing: more than it has.
  const std::size_t capacity = memory_info(Device::cuda()).capacity;
  EXPECT_THROW(Tensor::empty({static_cast<std::int64_t>(capacity / 2)}, DType::f32, Device::cuda()),
               OutOfMemory);
}

// Without a usable GPU the backend says why, and a cuda tensor is a clean error, not a crash.
TEST(CudaBackend, WithoutAGpuSaysWhy) {
  const cuda::Status& status = cuda::status();
  if (status.available) GTEST_SKIP() << "a GPU is usable here: " << status.devices.front().name;
  EXPECT_FALSE(status.reason.empty());
  try {
    Tensor::zeros({2}, DType::f32, Device::cuda());
    FAIL() << "a cuda tensor was made without a usable GPU";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(status.reason), std::string::npos) << error.what();
  }
  EXPECT_FALSE(cuda::is_available());
}

}  // namespace
}  // namespace tandem
