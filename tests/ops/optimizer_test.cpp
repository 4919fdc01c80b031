#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"
#include "ops/op_table.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::random_tensor;

Tensor values(std::vector<double> v, DType dtype) {
  const auto size = static_cast<std::int64_t>(v.size());
  return cast(Tensor::from_vector(v, {size}), dtype);
}

// f32 results carry a few ulps of rounding; f64 ones agree with the hand computation closely.
double tolerance(DType dtype) {
  return dtype == DType::f32 ? 1e-6 : 1e-12;
}

TEST(SgdUpdate, PlainStepByHand) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor param = values({1, 2}, dtype);
    Tensor no_velocity;
    // p -= 0.1 * g with g = [0.5, -1]
    sgd_update(param, values({0.5, -1}, dtype), no_velocity, update_schedule(0.1, 1),
               {0.0, false, 0.0});
    expect_close(param, values({0.95, 2.1}, DType::f64), tolerance(dtype));
    // weight decay 0.2 adds 0.2 p to g: g = [0.5 + 0.19, -1 + 0.42] = [0.69, -0.58]
    sgd_update(param, values({0.5, -1}, dtype), no_velocity, update_schedule(0.1, 1),
               {0.0, false, 0.2});
    expect_close(param, values({0.95 - 0.069, 2.1 + 0.058}, DType::f64), tolerance(dtype));
  }
}

TEST(SgdUpdate, MomentumAndNesterovByHand) {
  for (DType dtype : {DType::f32, DType::f64}) {
    // p = 1, g = 0.5, v = 0.2, momentum 0.9, lr 0.1: v = 0.9 * 0.2 - 0.05 = 0.13.
    Tensor param = values({1}, dtype);
    Tensor velocity = values({0.2}, dtype);
    sgd_update(param, values({0.5}, dtype), velocity, update_schedule(0.1, 1), {0.9, false, 0.0});
    expect_close(velocity, values({0.13}, DType::f64), tolerance(dtype), "velocity");
    expect_close(param, values({1.13}, DType::f64), tolerance(dtype), "classic: p + v");
    // Nesterov: p = 1 + 0.9 * 0.13 - 0.05 = 1.067.
    param = values({1}, dtype);
    velocity = values({0.2}, dtype);
    sgd_update(param, values({0.5}, dtype), velocity, update_schedule(0.1, 1), {0.9, true, 0.0});
    expect_close(velocity, values({0.13}, DType::f64), tolerance(dtype), "nesterov velocity");
    expect_close(param, values({1.067}, DType::f64), tolerance(dtype), "nesterov");
  }
}

// Keras Adam, step 1 and 2, from the formulas written out with numbers.
TEST(AdamUpdate, TwoStepsByHand) {
  for (DType dtype : {DType::f32, DType::f64}) {
    Tensor param = values({1, -2}, dtype);
    Tensor m = values({0, 0}, dtype);
    Tensor v = values({0, 0}, dtype);
    const AdamOptions options{0.9, 0.999, 1e-7, 0.0};
    // Step 1, g = [0.5, 0.1]: m = 0.1 g, v = 0.001 g^2, lr_t = 0.001 sqrt(0.001) / 0.1.
    adam_update(param, values({0.5, 0.1}, dtype), m, v, update_schedule(0.001, 1), options);
    const double lr_1 = 0.001 * std::sqrt(1 - 0.999) / (1 - 0.9);
    const double p0 = 1 - lr_1 * 0.05 / (std::sqrt(0.00025) + 1e-7);
    const double p1 = -2 - lr_1 * 0.01 / (std::sqrt(0.00001) + 1e-7);
    expect_close(m, values({0.05, 0.01}, DType::f64), tolerance(dtype), "m");
    expect_close(v, values({0.00025, 0.00001}, DType::f64), tolerance(dtype) * 1e-2, "v");
    expect_close(param, values({p0, p1}, DType::f64), tolerance(dtype), "param after step 1");
    // Step 2, g = [-0.5, 0.1].
    adam_update(param, values({-0.5, 0.1}, dtype), m, v, update_schedule(0.001, 2), options);
    const double m0 = 0.9 * 0.05 - 0.1 * 0.5, m1 = 0.9 * 0.01 + 0.1 * 0.1;
    const double v0 = 0.999 * 0.00025 + 0.001 * 0.25, v1 = 0.999 * 0.00001 + 0.001 * 0.01;
    const double lr_2 = 0.001 * std::sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9);
    expect_close(m, values({m0, m1}, DType::f64), tolerance(dtype), "m after step 2");
    expect_close(v, values({v0, v1}, DType::f64), tolerance(dtype) * 1e-2, "v after step 2");
    expect_close(
        param,
        values({p0 - lr_2 * m0 / (std::sqrt(v0) + 1e-7), p1 - lr_2 * m1 / (std::sqrt(v1) + 1e-7)},
               DType::f64),
        1e-7, "param after step 2");
  }
}

// AdamW: the parameter shrinks by lr * weight_decay * p before the Adam step (Keras' order).
TEST(AdamUpdate, DecoupledWeightDecayByHand) {
  Tensor param = values({3}, DType::f64);
  Tensor m = values({0}, DType::f64);
  Tensor v = values({0}, DType::f64);
  adam_update(param, values({0}, DType::f64), m, v, update_schedule(0.01, 1),
              {0.9, 0.999, 1e-7, 0.5});
  // g = 0: m = v = 0, the Adam term vanishes and only the decay acts: 3 (1 - 0.005).
  expect_close(param, values({3 * (1 - 0.01 * 0.5)}, DType::f64), 1e-15);
}

// A parameter large enough to run on all threads: f32 against f64, and in place.
TEST(Optimizers, LargeParametersMatchF64AndUpdateInPlace) {
  const Shape shape{1600, 64};
  const Tensor param64 = random_tensor(shape);
  const Tensor grad64 = random_tensor(shape);
  const Tensor m64 = random_tensor(shape, -0.1, 0.1, 0);
  const Tensor v64 = random_tensor(shape, 0.001, 0.1);
  const auto copy = [](const Tensor& t, DType dtype) { return cast(t, dtype).clone(); };
  Tensor param = copy(param64, DType::f32), m = copy(m64, DType::f32), v = copy(v64, DType::f32);
  const void* storage = param.raw_data();
  const Tensor view = reshape(param, {-1});  // shares param's storage
  Tensor param_ref = copy(param64, DType::f64), m_ref = m64.clone(), v_ref = v64.clone();
  const AdamOptions adam{0.9, 0.999, 1e-7, 0.004};
  for (std::int64_t step = 1; step <= 3; ++step) {
    adam_update(param, cast(grad64, DType::f32), m, v, update_schedule(0.01, step), adam);
    adam_update(param_ref, grad64, m_ref, v_ref, update_schedule(0.01, step), adam);
  }
  EXPECT_EQ(param.raw_data(), storage);
  expect_close(param, param_ref, 1e-5, "adam param");
  expect_close(m, m_ref, 1e-6, "adam m");
  expect_close(v, v_ref, 1e-6, "adam v");
  expect_close(reshape(view, shape), param_ref, 1e-5, "view of param");

  Tensor velocity = Tensor::zeros(shape), velocity_ref = Tensor::zeros(shape, DType::f64);
  for (bool nesterov : {false, true}) {
    const SgdOptions sgd{0.9, nesterov, 1e-3};
    sgd_update(param, cast(grad64, DType::f32), velocity, update_schedule(0.05, 1), sgd);
    sgd_update(param_ref, grad64, velocity_ref, update_schedule(0.05, 1), sgd);
  }
  expect_close(param, param_ref, 1e-5, "sgd param");
  expect_close(velocity, velocity_ref, 1e-5, "sgd velocity");
}

TEST(Optimizers, AreNotDifferentiable) {
  EXPECT_EQ(op_def(OpKind::sgd_update).gradient, nullptr);
  EXPECT_EQ(op_def(OpKind::adam_update).gradient, nullptr);
  EXPECT_EQ(op_def(OpKind::sgd_update).output_aliases, (std::vector<int>{0, 3}));
  EXPECT_EQ(op_def(OpKind::adam_update).output_aliases, (std::vector<int>{0, 3, 4}));
}

TEST(Optimizers, Errors) {
  Tensor param = Tensor::zeros({3});
  Tensor none;
  Tensor m = Tensor::zeros({3});
  Tensor v = Tensor::zeros({3});
  Tensor short_slot = Tensor::zeros({2});
  EXPECT_THROW(
      sgd_update(param, Tensor::zeros({3}), none, update_schedule(0.1, 1), {0.9, false, 0}),
      InvalidArgument);
  EXPECT_THROW(sgd_update(param, Tensor::zeros({2}), none, update_schedule(0.1, 1)),
               InvalidArgument);
  EXPECT_THROW(sgd_update(param, Tensor::zeros({3}, DType::f64), none, update_schedule(0.1, 1)),
               InvalidArgument);
  EXPECT_THROW(
      sgd_update(param, Tensor::zeros({3}), short_slot, update_schedule(0.1, 1), {0.9, false, 0}),
      InvalidArgument);
  EXPECT_THROW(sgd_update(param, Tensor::zeros({3}), m, update_schedule(0.1, 1), {1.5, false, 0}),
               InvalidArgument);
  const Tensor schedule = update_schedule(0.001, 1);
  EXPECT_THROW(update_schedule(0.001, 0), InvalidArgument);
  EXPECT_THROW(adam_update(param, Tensor::zeros({3}), m, short_slot, schedule), InvalidArgument);
  EXPECT_THROW(adam_update(param, Tensor::zeros({3}), m, v, schedule, {1.0, 0.999, 1e-7, 0}),
               InvalidArgument);
  // The schedule is f64 (2): a learning rate alone is refused, naming update_schedule.
  EXPECT_THROW(adam_update(param, Tensor::zeros({3}), m, v, Tensor::scalar(0.001, DType::f64)),
               InvalidArgument);
  Tensor integer = Tensor::zeros({3}, DType::i32);
  EXPECT_THROW(adam_update(integer, integer, integer, integer, schedule), InvalidArgument);
}

}  // namespace
}  // namespace tandem
