// Compiled steps: tracing, the passes, the memory plan, host operands, the cache and
// tandem::function, each against the same computation run eagerly.
#include <gtest/gtest.h>

#include <cstring>

#include "support/errors.h"
#include "support/pooled_convolution.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::error_of;

Tensor uniform(const Shape& shape, std::uint64_t seed) {
  Generator generator(seed);
  return random_uniform(shape, -1.0, 1.0, DType::f32, generator);
}

// Bit-for-bit equality: the graph runs the eager kernels on the same inputs.
void expect_identical(const Tensor& actual, const Tensor& expected, const std::string& label) {
  ASSERT_EQ(actual.shape(), expected.shape()) << label;
  ASSERT_EQ(actual.dtype(), expected.dtype()) << label;
  const Tensor a = actual.to(Device::cpu());
  const Tensor b = expected.to(Device::cpu());
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << label;
}

// Captures compile messages for the test's lifetime.
class CapturedLog {
 public:
  CapturedLog() {
    set_compile_log([this](const std::string& line) { lines.push_back(line); });
  }
  ~CapturedLog() { set_compile_log(nullptr); }
  std::vector<std::string> lines;
};

std::vector<Tensor> dense_relu(const std::vector<Tensor>& in) {
  return {relu(matmul(in[0], in[1], in[2]))};
}

TEST(CompiledStep, RunsAsEagerDoesBitForBit) {
  const Tensor x = uniform({8, 5}, 1), w = uniform({5, 3}, 2), b = uniform({3}, 3);
  CompiledStep step = trace_step("dense", dense_relu, {x, w, b});
  EXPECT_EQ(step.stats().traced_nodes, 2u);
  // On the CPU the relu becomes the product's oneDNN post-op.
  EXPECT_EQ(step.stats().nodes, 1u);
  EXPECT_EQ(step.stats().fused, 1u);
  EXPECT_NE(step.listing().find("matmul+bias+relu("), std::string::npos) << step.listing();
  const std::vector<Tensor> compiled = step.run({x, w, b});
  ASSERT_EQ(compiled.size(), 1u);
  expect_identical(compiled[0], dense_relu({x, w, b})[0], "dense relu");
  // Other values of the same shapes run the same graph.
  const Tensor x2 = uniform({8, 5}, 4);
  expect_identical(step.run({x2, w, b})[0], dense_relu({x2, w, b})[0], "second batch");
}

// A convolution's relu is fused into it, in the forward pass and for its gradients (which read
// the fused node's output), with the same bits as eagerly; a relu whose input something else
// also reads stays a node of its own.
TEST(CompiledStep, FusesReluIntoConvolutionsAndProducts) {
  const Tensor x = uniform({2, 9, 9, 3}, 20), filter = uniform({3, 3, 3, 4}, 21);
  const Tensor bias = uniform({4}, 22);
  const auto body = [](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(in[1]);
    tape.watch(in[2]);
    const Tensor activation = relu(conv2d(in[0], in[1], in[2], {.padding = Padding::same}));
    const Tensor product = matmul(in[3], in[3], false, true);
    const Tensor kept = relu(product);  // product is also returned: no fusion
    const Tensor loss = sum(square(activation)) + sum(kept);
    const std::vector<Tensor> grads = tape.gradient(loss, {in[1], in[2]});
    return std::vector<Tensor>{loss, grads[0], grads[1], product};
  };
  const std::vector<Tensor> inputs{x, filter, bias, uniform({3, 5}, 23)};
  CompiledStep step = trace_step("fusion", body, inputs);
  // 1 relu into the convolution, 2 more nodes into the backward chain of square and relu.
  EXPECT_EQ(step.stats().fused, 3u) << step.listing();
  EXPECT_NE(step.listing().find("conv2d+bias+relu("), std::string::npos) << step.listing();
  EXPECT_NE(step.listing().find("= relu(%"), std::string::npos) << step.listing();
  const std::vector<Tensor> compiled = step.run(inputs);
  const std::vector<Tensor> eager = body(inputs);
  for (std::size_t i = 0; i < eager.size(); ++i)
    expect_identical(compiled[i], eager[i], "result " + std::to_string(i));
}

// conv -> relu -> max pooling, as in the tutorial CNN: in the backward pass, relu's gradient
// (masking with the relu's output) follows the pooling's, which reads the same output, so the
// pooling's backward pass masks the cells it writes itself; same bits as eagerly.
TEST(CompiledStep, FusesReluBackwardIntoMaxPoolingBackward) {
  const Tensor x = uniform({2, 9, 9, 3}, 30), filter = uniform({3, 3, 3, 4}, 31);
  const auto body = [](const std::vector<Tensor>& in) {
    GradientTape tape;
    tape.watch(in[1]);
    const Tensor pooled = max_pool2d(relu(conv2d(in[0], in[1])));  // (2, 3, 3, 4)
    const Tensor loss = sum(square(pooled));
    return std::vector<Tensor>{loss, tape.gradient(loss, {in[1]})[0]};
  };
  CompiledStep step = trace_step("pooling", body, {x, filter});
  // relu into the convolution, relu_backward into the pooling's and that into the filter
  // gradient (which reads nothing else of it), square's backward (two muls) into one loop. The
  // filter gradient forms its dy whole here (27 window entries to 4 channels: not the
  // few-channel loops), so the bits are eager's; the convolution and the pooling stay two ops
  // (its kernel would not form the convolution in bands on these shapes).
  EXPECT_EQ(step.stats().fused, 4u) << step.listing();
  EXPECT_NE(step.listing().find("max_pool2d_backward+relu_backward+conv2d_backward_filter("),
            std::string::npos)
      << step.listing();
  EXPECT_NE(step.listing().find("= max_pool2d("), std::string::npos) << step.listing();
  EXPECT_EQ(step.listing().find("= relu_backward("), std::string::npos) << step.listing();
  const std::vector<Tensor> compiled = step.run({x, filter});
  const std::vector<Tensor> eager = body({x, filter});
  expect_identical(compiled[0], eager[0], "loss");
  expect_identical(compiled[1], eager[1], "filter gradient");
}

// A first layer (one input channel, 3x3 to 32 channels) with relu and max pooling: the
// convolution is pooled as it is formed and its filter gradient takes the pooling's gradient from
// the winners as it is formed (the few-channel loops, on AVX-512 CPUs), with eager's bits; where
// the pooling's gradient is read by another node too (the input's gradient), nothing fuses.
TEST(CompiledStep, FusesMaxPoolingBackwardIntoAFirstLayersFilterGradient) {
  const Tensor x = uniform({4, 14, 12, 1}, 32), filter = uniform({3, 3, 1, 32}, 33);
  for (const bool input_gradient : {false, true}) {
    const auto body = [input_gradient](const std::vector<Tensor>& in) {
      GradientTape tape;
      tape.watch(in[1]);
      if (input_gradient) tape.watch(in[0]);
      const Tensor pooled = max_pool2d(relu(conv2d(in[0], in[1])));  // (4, 6, 5, 32)
      const Tensor loss = sum(square(pooled));
      if (!input_gradient) return std::vector<Tensor>{loss, tape.gradient(loss, {in[1]})[0]};
      std::vector<Tensor> gradients = tape.gradient(loss, {in[1], in[0]});
      return std::vector<Tensor>{loss, gradients[0], gradients[1]};
    };
    CompiledStep step = trace_step("first_layer", body, {x, filter});
    const bool fused = step.listing().find("+conv2d_backward_filter(") != std::string::npos;
    EXPECT_EQ(fused, !input_gradient) << step.listing();
    const bool pooled = step.listing().find("= conv2d+relu+max_pool2d(") != std::string::npos;
    EXPECT_EQ(pooled,
              !input_gradient && testing::cpu_pools_as_it_convolves(x.shape(), filter.shape()))
        << step.listing();
    const std::vector<Tensor> compiled = step.run({x, filter});
    const std::vector<Tensor> eager = body({x, filter});
    ASSERT_EQ(compiled.size(), eager.size());
    for (std::size_t i = 0; i < compiled.size(); ++i)
      expect_identical(compiled[i], eager[i], "result " + std::to_string(i));
  }
}

// A residual block's tail, relu(x * scale + shortcut) + bias, and its gradient: each chain of
// element-wise ops becomes one loop, with the same bits as eagerly in f32 and bf16 (tensors
// large enough that the eager ops take oneDNN's kernels).
TEST(CompiledStep, FusesElementwiseChainsIntoOneLoop) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    const std::vector<Tensor> inputs{cast(uniform({64, 300}, 80), dtype),
                                     cast(uniform({64, 300}, 81), dtype),
                                     cast(uniform({300}, 82), dtype)};
    const auto body = [](const std::vector<Tensor>& in) {
      GradientTape tape;
      tape.watch(in[0]);
      const Tensor y = relu(in[0] * 0.5 + in[1]) + in[2];  // (64, 300)
      const Tensor loss = sum(square(y));
      return std::vector<Tensor>{loss, tape.gradient(loss, {in[0]})[0]};
    };
    CompiledStep step = trace_step("residual", body, inputs);
    const std::string listing = step.listing();
    // The relu's output is also read by its backward pass: the bias add stays a node.
    EXPECT_NE(listing.find("= mul+add+relu("), std::string::npos) << listing;
    EXPECT_NE(listing.find("relu_backward"), std::string::npos) << listing;
    EXPECT_GE(step.stats().fused, 4u) << listing;
    const std::vector<Tensor> compiled = step.run(inputs);
    const std::vector<Tensor> eager = body(inputs);
    expect_identical(compiled[0], eager[0], std::string("loss, ") + dtype_name(dtype));
    expect_identical(compiled[1], eager[1], std::string("gradient, ") + dtype_name(dtype));
  }
}

// A residual block without normalisation, relu(conv(x) + x), and a dense one, relu(x W + b + x):
// the add becomes the product's residual post-op and the relu follows it into the same node,
// with the gradients flowing to both branches; same bits as eagerly in f32, and in bf16 (where
// the pass leaves the add alone, since the post-op would add before rounding).
TEST(CompiledStep, FusesResidualAddsIntoConvolutionsAndProducts) {
  for (const DType dtype : {DType::f32, DType::bf16}) {
    const std::vector<Tensor> inputs{
        cast(uniform({4, 9, 9, 6}, 100), dtype), cast(uniform({3, 3, 6, 6}, 101), dtype),
        cast(uniform({40, 24}, 102), dtype), cast(uniform({24, 24}, 103), dtype),
        cast(uniform({24}, 104), dtype)};
    const auto body = [](const std::vector<Tensor>& in) {
      GradientTape tape;
      for (std::size_t i = 0; i < 5; ++i)
        tape.watch(in[i]);
      const Tensor block = relu(conv2d(in[0], in[1], {.padding = Padding::same}) + in[0]);
      const Tensor dense = relu(in[2] + matmul(in[2], in[3], in[4]));  // residual on the left
      const Tensor loss = sum(square(block)) + sum(square(dense));
      std::vector<Tensor> results = tape.gradient(loss, in);
      results.insert(results.begin(), loss);
      return results;
    };
    CompiledStep step = trace_step("residual", body, inputs);
    const std::string listing = step.listing();
    const std::string label = dtype_name(dtype);
    if (dtype == DType::f32) {
      EXPECT_NE(listing.find("= conv2d+add+relu("), std::string::npos) << listing;
      EXPECT_NE(listing.find("= matmul+bias+add+relu("), std::string::npos) << listing;
    } else {
      EXPECT_EQ(listing.find("+add+relu("), std::string::npos) << listing;
    }
    const std::vector<Tensor> compiled = step.run(inputs);
    const std::vector<Tensor> eager = body(inputs);
    ASSERT_EQ(compiled.size(), eager.size());
    for (std::size_t i = 0; i < eager.size(); ++i)
      expect_identical(compiled[i], eager[i], label + " result " + std::to_string(i));
  }
}

// A chain's nodes run where it ends: one that reads a weight an update writes before that end
// stays a node of its own, or it would read the new weight.
TEST(CompiledStep, AChainDoesNotMoveAReadPastAnInPlaceUpdate) {
  Tensor w = uniform({5}, 90);
  w.set_variable(true);
  const auto body = [&](const std::vector<Tensor>& in) {
    const Tensor scaled = w * in[0];  // reads w before the update
    Tensor none;
    sgd_update(w, in[0], none, update_schedule(0.5, 1, in[0].device()));
    return std::vector<Tensor>{relu(scaled + in[0])};
  };
  const Tensor g = uniform({5}, 91);
  CompiledStep step = trace_step("update between", body, {g});
  EXPECT_NE(step.listing().find("= mul(%"), std::string::npos) << step.listing();
  EXPECT_NE(step.listing().find("= add+relu("), std::string::npos) << step.listing();
  const Tensor w_before = w.clone();
  const Tensor compiled = step.run({g})[0];
  expect_identical(compiled, relu(w_before * g + g),
                   "the chain reads the weight before the update");
}

TEST(CompiledStep, TracingRunsNothingAndReadingAValueNamesTheOp) {
  const Tensor x = uniform({4, 4}, 5);
  int body_calls = 0;
  CompiledStep step = trace_step("square",
                                 [&](const std::vector<Tensor>& in) {
                                   ++body_calls;
                                   EXPECT_TRUE(in[0].is_symbolic());
                                   const Tensor y = square(in[0]);
                                   EXPECT_TRUE(y.is_symbolic());
                                   return std::vector<Tensor>{y};
                                 },
                                 {x});
  step.run({x});
  step.run({x});
  EXPECT_EQ(body_calls, 1);
  try {
    trace_step("reads",
               [](const std::vector<Tensor>& in) {
                 const Tensor total = sum(exp(in[0]));
                 if (total.item() > 0) return std::vector<Tensor>{total};  // host control flow
                 return std::vector<Tensor>{in[0]};
               },
               {x});
    FAIL() << "reading a symbolic value did not throw";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("output 0 of sum (node 1)"), std::string::npos) << message;
    EXPECT_NE(message.find("traced step 'reads'"), std::string::npos) << message;
    EXPECT_NE(message.find("--jit off"), std::string::npos) << message;
  }
}

// A random draw made on the host inside the step would be frozen into the graph: refused.
TEST(CompiledStep, RefusesRandomDrawsThatWouldBeFrozen) {
  Generator generator(3);
  try {
    trace_step("noisy",
               [&](const std::vector<Tensor>& in) {
                 return std::vector<Tensor>{
                     in[0] + random_normal(in[0].shape(), 0.0, 1.0, DType::f32, generator)};
               },
               {uniform({4}, 18)});
    FAIL() << "random_normal inside a trace did not throw";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("random_normal inside a traced step"), std::string::npos) << message;
    EXPECT_NE(message.find("--jit off"), std::string::npos) << message;
  }
  EXPECT_EQ(generator.offset(), 0u) << "the refused draw advanced the generator";
  EXPECT_NO_THROW(random_normal({2}, 0.0, 1.0, DType::f32, generator)) << "after the trace";
}

TEST(CompiledStep, FoldsConstantsMergesRepeatsAndDropsDeadWork) {
  const Tensor x = uniform({6}, 6);
  const auto body = [](const std::vector<Tensor>& in) {
    // Made during the trace and held by nothing else: constants, folded to one.
    const Tensor three = Tensor::scalar(1.0) + Tensor::scalar(2.0);
    const Tensor unused = tanh(in[0]);  // nothing uses it
    return std::vector<Tensor>{exp(in[0]) * three + exp(in[0])};
  };
  CompiledStep step = trace_step("passes", body, {x});
  const CompiledStepStats& stats = step.stats();
  EXPECT_EQ(stats.folded, 1u) << step.listing();
  EXPECT_EQ(stats.merged, 1u) << step.listing();
  EXPECT_EQ(stats.removed, 1u) << step.listing();
  EXPECT_EQ(stats.nodes, 2u) << step.listing();  // exp, mul+add (fused)
  expect_identical(step.run({x})[0], body({x})[0], "after the passes");
}

TEST(CompiledStep, ReadsWeightsByReferenceAndUpdatesThemInPlace) {
  const Tensor x = uniform({4, 3}, 7);
  Tensor w_compiled = uniform({3, 2}, 8);
  w_compiled.set_variable(true);
  Tensor w_eager = w_compiled.clone();
  w_eager.set_variable(true);
  // One SGD step on sum(x w)^2, the gradient by the tape.
  const auto sgd_step = [](const Tensor& input, Tensor& w) {
    Tensor gradient;
    Tensor loss;
    {
      GradientTape tape;
      loss = sum(square(matmul(input, w)));
      gradient = tape.gradient(loss, {w})[0];
    }
    Tensor no_velocity;
    sgd_update(w, gradient, no_velocity, update_schedule(0.01, 1, w.device()));
    return loss;
  };
  CompiledStep step = trace_step("sgd",
                                 [&](const std::vector<Tensor>& in) {
                                   return std::vector<Tensor>{sgd_step(in[0], w_compiled)};
                                 },
                                 {x});
  for (int i = 0; i < 3; ++i) {
    const Tensor loss_compiled = step.run({x})[0];
    const Tensor loss_eager = sgd_step(x, w_eager);
    expect_identical(loss_compiled, loss_eager, "loss " + std::to_string(i));
    expect_identical(w_compiled, w_eager, "weights after step " + std::to_string(i));
  }
  // New storage for the weight (a checkpoint restored) is what the next run reads and updates.
  const Tensor restored = uniform({3, 2}, 9);
  w_compiled.set_data(restored.clone());
  w_eager.set_data(restored.clone());
  expect_identical(step.run({x})[0], sgd_step(x, w_eager), "loss after set_data");
  expect_identical(w_compiled, w_eager, "weights after set_data");
}

// One Adam step of three weights whose sizes split unevenly across threads and lanes, through
// `weights` and `slots` (m and v per weight).
Tensor adam_step(const Tensor& input, std::vector<Tensor>& weights, std::vector<Tensor>& slots) {
  Tensor loss;
  std::vector<Tensor> gradients;
  {
    GradientTape tape;
    loss = sum(square(matmul(matmul(input, weights[0]) + weights[1], weights[2])));
    gradients = tape.gradient(loss, weights);
  }
  const Tensor schedule = update_schedule(0.01, 3, input.device());  // one for all, as Adam's
  for (std::size_t i = 0; i < weights.size(); ++i)
    adam_update(weights[i], gradients[i], slots[2 * i], slots[2 * i + 1], schedule, {});
  return loss;
}

// The optimizer's updates of one kind, options and schedule become one multi-tensor update, with
// the same bits as the eager updates, however the threads split its lanes.
TEST(CompiledStep, GroupsOptimizerUpdatesIntoOneMultiTensorUpdate) {
  const Tensor x = uniform({4, 7}, 40);
  const std::vector<Shape> shapes{{7, 333}, {333}, {333, 5}};
  std::vector<Tensor> compiled_weights, eager_weights, compiled_slots, eager_slots;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    compiled_weights.push_back(uniform(shapes[i], 41 + i));
    compiled_weights.back().set_variable(true);
    eager_weights.push_back(compiled_weights.back().clone());
    eager_weights.back().set_variable(true);
    for (int slot = 0; slot < 2; ++slot) {
      compiled_slots.push_back(uniform(shapes[i], 50 + 2 * i + slot) * uniform(shapes[i], 60));
      eager_slots.push_back(compiled_slots.back().clone());
    }
  }
  for (Tensor& slot : compiled_slots)
    slot = square(slot);  // v must not be negative; m may be
  for (std::size_t i = 0; i < eager_slots.size(); ++i)
    eager_slots[i] = compiled_slots[i].clone();
  CompiledStep step =
      trace_step("adam",
                 [&](const std::vector<Tensor>& in) {
                   return std::vector<Tensor>{adam_step(in[0], compiled_weights, compiled_slots)};
                 },
                 {x});
  EXPECT_EQ(step.stats().grouped, 3u) << step.listing();
  EXPECT_NE(step.listing().find("adam_update x3("), std::string::npos) << step.listing();
  for (int run = 0; run < 2; ++run) {
    expect_identical(step.run({x})[0], adam_step(x, eager_weights, eager_slots),
                     "loss " + std::to_string(run));
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      expect_identical(compiled_weights[i], eager_weights[i], "weight " + std::to_string(i));
      expect_identical(compiled_slots[2 * i + 1], eager_slots[2 * i + 1], "v " + std::to_string(i));
    }
  }
}

// An update whose weight a later node reads before the last update of its kind stays where it
// is: moved, that read would see the old weight.
TEST(CompiledStep, AnUpdateReadBeforeTheOthersIsNotGrouped) {
  Tensor a = uniform({5}, 70), b = uniform({5}, 71);
  a.set_variable(true);
  b.set_variable(true);
  const auto body = [&](const std::vector<Tensor>& in) {
    const Tensor schedule = update_schedule(0.5, 1, in[0].device());
    Tensor none;
    sgd_update(a, in[0], none, schedule);
    const Tensor read = sum(a * in[0]);  // reads the updated a
    sgd_update(b, in[0], none, schedule);
    return std::vector<Tensor>{read};
  };
  const Tensor g = uniform({5}, 72);
  CompiledStep step = trace_step("interleaved", body, {g});
  EXPECT_EQ(step.stats().grouped, 0u) << step.listing();
  const Tensor a_before = a.clone();
  const Tensor read = step.run({g})[0];
  Tensor a_eager = a_before.clone();
  Tensor none;
  sgd_update(a_eager, g, none, update_schedule(0.5, 1, g.device()));
  expect_identical(read, sum(a_eager * g), "the read of the updated weight");
}

TEST(CompiledStep, HostOperandsAreFilledEveryRunInTraceOrder) {
  const Tensor x = uniform({64}, 10);
  Generator compiled_generator(42), eager_generator(42);
  double rate = 0.5;
  std::vector<std::string> fills;
  const auto body = [&](const Tensor& input, Generator& generator) {
    const Tensor scale = host_operand("scale", {}, DType::f32, input.device(), [&](Tensor& host) {
      fills.push_back("scale");
      host.data<float>()[0] = static_cast<float>(rate);
    });
    const DropoutResult dropped = dropout(input, 0.25, generator);
    return dropped.y * scale;
  };
  CompiledStep step = trace_step("host",
                                 [&](const std::vector<Tensor>& in) {
                                   return std::vector<Tensor>{body(in[0], compiled_generator)};
                                 },
                                 {x});
  EXPECT_TRUE(fills.empty()) << "a fill ran at trace time";
  EXPECT_EQ(step.stats().host_operands, 2u);
  for (int i = 0; i < 3; ++i) {
    rate = 0.5 + i;  // changes every run: an operand, not a constant
    const Tensor compiled = step.run({x})[0];
    const Tensor eager = body(x, eager_generator);
    expect_identical(compiled, eager, "run " + std::to_string(i));
  }
  EXPECT_EQ(compiled_generator.offset(), eager_generator.offset());
  EXPECT_EQ(fills.size(), 6u);
}

TEST(CompiledStep, PlansMemoryByLivenessAndKeepsResultsTheCallerHolds) {
  const Tensor x = uniform({256, 256}, 11);
  const auto chain = [](const std::vector<Tensor>& in) {
    Tensor y = in[0];
    for (int i = 0; i < 8; ++i)
      y = tanh(y + in[0]);
    return std::vector<Tensor>{y};
  };
  CompiledStep step = trace_step("chain", chain, {x});
  const CompiledStepStats& stats = step.stats();
  const std::size_t buffer = 256 * 256 * sizeof(float);
  // Sixteen intermediates, two alive at a time; the result has a buffer of its own.
  EXPECT_EQ(stats.unplanned_bytes, 16 * buffer);
  EXPECT_EQ(stats.arena_bytes, 2 * buffer) << step.listing();
  EXPECT_EQ(stats.output_bytes, buffer);
  EXPECT_NE(step.listing().find("memory plan"), std::string::npos);
  const Tensor first = step.run({x})[0];
  const Tensor kept = first.clone();
  const Tensor second = step.run({uniform({256, 256}, 12)})[0];
  expect_identical(first, kept, "a result held across the next run");
  EXPECT_NE(first.raw_data(), second.raw_data());
}

// Largest difference between two f32 tensors.
double max_difference(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  double largest = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i)
    largest = std::max(largest, static_cast<double>(std::abs(x[i] - y[i])));
  return largest;
}

// A residual block at inference, inputs x, a 3x3 filter and two 1x1 ones: the block's input r is
// read last as the residual of the convolution that ends the block.
std::vector<Tensor> residual_block(const std::vector<Tensor>& in) {
  const Conv2DOptions same{.padding = Padding::same};
  const Tensor r = relu(conv2d(in[0], in[1], same));  // (N, H, W, C)
  const Tensor h = relu(conv2d(r, in[2]));
  const Tensor y = relu(conv2d(h, in[3]) + r);
  return std::vector<Tensor>{conv2d(y, in[2])};
}

// The block compiled writes its last convolution's result over r's buffer and accumulates onto it
// (oneDNN's sum post-op) instead of reading r as a second operand, with the bits of the eager
// convolution and add.
void expect_written_over_the_residual(const std::vector<Tensor>& inputs) {
  CompiledStep step = trace_step("block", residual_block, inputs);
  EXPECT_EQ(step.stats().in_place, 1u) << step.listing();
  EXPECT_NE(step.listing().find("1 written in place"), std::string::npos) << step.listing();
  const Tensor compiled = step.run(inputs)[0];
  expect_identical(compiled, residual_block(inputs)[0], "in place");
  expect_identical(step.run(inputs)[0], compiled, "a second run");
}

// Not where the residual is also the convolution's input (it would be overwritten while read),
// nor in bf16 (its residual is added after rounding).
TEST(CompiledStep, WritesAResidualConvolutionOverTheResidualItEnds) {
  const std::vector<Tensor> inputs{uniform({2, 8, 8, 16}, 30), uniform({3, 3, 16, 16}, 31),
                                   uniform({1, 1, 16, 16}, 32), uniform({1, 1, 16, 16}, 33)};
  expect_written_over_the_residual(inputs);

  const auto self_residual = [&](const std::vector<Tensor>& in) {
    const Tensor r = relu(conv2d(in[0], in[1], Conv2DOptions{.padding = Padding::same}));
    return std::vector<Tensor>{conv2d(relu(conv2d(r, in[2]) + r), in[2])};
  };
  CompiledStep read_twice = trace_step("self residual", self_residual, inputs);
  EXPECT_EQ(read_twice.stats().in_place, 0u) << read_twice.listing();
  EXPECT_LT(max_difference(read_twice.run(inputs)[0], self_residual(inputs)[0]), 1e-5);

  std::vector<Tensor> bf16_inputs;
  for (const Tensor& input : inputs)
    bf16_inputs.push_back(cast(input, DType::bf16));
  EXPECT_EQ(trace_step("bf16 block", residual_block, bf16_inputs).stats().in_place, 0u);
}

// The same on 2x2 images with 64 channels, whose convolutions run as matrix products of their
// unrolled windows (few positions for their channels): the product accumulates onto the residual
// in its destination.
TEST(CompiledStep, WritesAResidualProductOverTheResidualItEnds) {
  expect_written_over_the_residual({uniform({16, 2, 2, 64}, 40), uniform({3, 3, 64, 64}, 41),
                                    uniform({1, 1, 64, 64}, 42), uniform({1, 1, 64, 64}, 43)});
}

// The integer convolution takes the same way: its result over its residual's dead buffer, with
// the eager bits.
TEST(CompiledStep, WritesAnIntegerConvolutionOverTheResidualItEnds) {
  const Tensor scale = Tensor::scalar(0.02f);
  const Tensor filter = cast(uniform({1, 1, 16, 16}, 34) * 100.0f, DType::i8);
  const Tensor filter_scale = Tensor::full({16}, 0.01f), bias = uniform({16}, 35);
  const auto block = [&](const std::vector<Tensor>& in) {
    const Tensor r = relu(in[0] * 2.0f);  // (2, 8, 8, 16)
    const Tensor y =
        relu(quantized_conv2d(relu(in[0]), {.scale = scale}, filter, filter_scale, bias) + r);
    return std::vector<Tensor>{y * 3.0f};
  };
  const std::vector<Tensor> inputs{uniform({2, 8, 8, 16}, 36)};
  CompiledStep step = trace_step("integer block", block, inputs);
  EXPECT_EQ(step.stats().in_place, 1u) << step.listing();
  expect_identical(step.run(inputs)[0], block(inputs)[0], "in place");
}

// The same for an integer product: on a CPU without VNNI it runs on the float matmul kernel,
// whose GEMM writes the product before its post-op reads the residual.
TEST(CompiledStep, WritesAnIntegerProductOverTheResidualItEnds) {
  const Tensor scale = Tensor::scalar(0.02f);
  const Tensor weights = cast(uniform({16, 16}, 37) * 100.0f, DType::i8);
  const Tensor weight_scale = Tensor::full({16}, 0.01f), bias = uniform({16}, 38);
  const auto block = [&](const std::vector<Tensor>& in) {
    const Tensor r = relu(in[0] * 2.0f);  // (32, 16)
    const Tensor y =
        relu(quantized_matmul(relu(in[0]), {.scale = scale}, weights, weight_scale, bias) + r);
    return std::vector<Tensor>{y * 3.0f};
  };
  const std::vector<Tensor> inputs{uniform({32, 16}, 39)};
  CompiledStep step = trace_step("integer dense block", block, inputs);
  EXPECT_EQ(step.stats().in_place, 1u) << step.listing();
  expect_identical(step.run(inputs)[0], block(inputs)[0], "in place");
}

TEST(CompiledStep, ReleasedMemoryComesBackAtTheNextRun) {
  const Tensor x = uniform({64, 64}, 16);
  const auto body = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{tanh(exp(in[0]) + in[0])};
  };
  CompiledStep step = trace_step("released", body, {x});
  const Tensor first = step.run({x})[0].clone();
  const std::size_t held = memory_info(Device::cpu()).held;
  step.release_memory();
  EXPECT_LT(memory_info(Device::cpu()).held, held);
  expect_identical(step.run({x})[0], first, "after release_memory");
}

// The CPU kernels keep their primitives and arguments for each node (KernelContext::state):
// runs on inputs in new buffers, on a weight given new storage, on a constant weight, and after
// the step's memory was released must each give the eager bits.
TEST(CompiledStep, KernelsKeptStateFollowsEachRunsBuffers) {
  Tensor filter = uniform({3, 3, 8, 8}, 110);
  Tensor constant_filter = uniform({1, 1, 8, 16}, 111);
  constant_filter.set_constant(true);
  Tensor weights = uniform({16, 5}, 112);
  const auto body = [&](const std::vector<Tensor>& in) {
    const Tensor block = relu(conv2d(in[0], filter, {.padding = Padding::same}) + in[0]);
    const Tensor widened = relu(conv2d(block, constant_filter, {.strides = {2, 2}}));
    return std::vector<Tensor>{matmul(reshape(widened, {2, -1}), weights)};
  };
  const auto x = [](std::uint64_t seed) {
    return std::vector<Tensor>{uniform({2, 2, 2, 8}, seed)};
  };
  CompiledStep step = trace_step("kept state", body, x(113));
  for (std::uint64_t seed = 113; seed < 116; ++seed) {
    expect_identical(step.run(x(seed))[0], body(x(seed))[0], "input " + std::to_string(seed));
  }
  filter.set_data(uniform({3, 3, 8, 8}, 117));
  weights.set_data(uniform({16, 5}, 118));
  expect_identical(step.run(x(119))[0], body(x(119))[0], "weights given new storage");
  step.release_memory();
  expect_identical(step.run(x(120))[0], body(x(120))[0], "after release_memory");
}

TEST(CompiledStep, RefusesInputsOfAnotherSignature) {
  CompiledStep step =
      trace_step("dense", dense_relu, {uniform({8, 5}, 1), uniform({5, 3}, 2), uniform({3}, 3)});
  const std::string message = error_of([&] {
    step.run({uniform({4, 5}, 1), uniform({5, 3}, 2), uniform({3}, 3)});
  });
  EXPECT_NE(message.find("input 0 was traced as (8, 5) f32"), std::string::npos) << message;
  EXPECT_NE(message.find("got (4, 5) f32"), std::string::npos) << message;
}

TEST(Function, TracesOncePerSignatureAndSaysWhatChanged) {
  CapturedLog log;
  int traces = 0;
  Function step = function("double_it", [&](const std::vector<Tensor>& in) {
    ++traces;
    return std::vector<Tensor>{in[0] * 2.0};
  });
  const Tensor a = uniform({4, 3}, 13);
  for (int i = 0; i < 3; ++i)
    expect_identical(step({a})[0], a * 2.0, "call " + std::to_string(i));
  EXPECT_EQ(traces, 1);
  EXPECT_TRUE(log.lines.empty());
  step({uniform({2, 3}, 14)});
  EXPECT_EQ(traces, 2);
  ASSERT_EQ(log.lines.size(), 1u);
  EXPECT_NE(log.lines[0].find("input 0: (4, 3) f32 on cpu -> (2, 3) f32 on cpu"), std::string::npos)
      << log.lines[0];
  step({a});  // cached: no trace, no message
  EXPECT_EQ(traces, 2);
  step({uniform({1, 3}, 15)});
  EXPECT_EQ(step.compiles(), 3);
  ASSERT_EQ(log.lines.size(), 3u);
  EXPECT_NE(log.lines[2].find("compiled 3 times"), std::string::npos) << log.lines[2];
  EXPECT_NE(log.lines[2].find("partial last batch"), std::string::npos) << log.lines[2];
}

TEST(Function, ACallInsideAnotherTraceIsInlined) {
  Function inner = function(
      "inner", [](const std::vector<Tensor>& in) { return std::vector<Tensor>{exp(in[0])}; });
  Function outer = function("outer", [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{inner({in[0]})[0] + in[0]};
  });
  const Tensor x = uniform({5}, 17);
  expect_identical(outer({x})[0], exp(x) + x, "outer(inner)");
  EXPECT_EQ(inner.compiles(), 0);
  EXPECT_EQ(outer.last_step()->stats().nodes, 2u);
}

}  // namespace
}  // namespace tandem
