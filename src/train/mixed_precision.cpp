// Dtype policies and dynamic loss scaling (keras.mixed_precision).
#include "tandem/mixed_precision.h"

#include <cmath>
#include <mutex>

#include "core/tensor_copy.h"
#include "tandem/ops.h"

namespace tandem::mixed_precision {
namespace {

struct PolicyName {
  const char* name;
  DType compute;
  DType variable;
};

constexpr PolicyName kPolicies[] = {
    {"float32", DType::f32, DType::f32},       {"mixed_bfloat16", DType::bf16, DType::f32},
    {"mixed_float16", DType::f16, DType::f32}, {"bfloat16", DType::bf16, DType::bf16},
    {"float16", DType::f16, DType::f16},       {"float64", DType::f64, DType::f64},
};

struct GlobalPolicy {
  std::mutex mutex;
  std::optional<Policy> policy;
};

GlobalPolicy& global() {
  static GlobalPolicy state;
  return state;
}

}  // namespace

Policy::Policy(const std::string& name) : name_(name) {
  for (const PolicyName& known : kPolicies) {
    if (name == known.name) {
      compute_ = known.compute;
      variable_ = known.variable;
      return;
    }
  }
  std::string names;
  for (const PolicyName& known : kPolicies)
    names += (names.empty() ? "" : ", ") + std::string(known.name);
  throw InvalidArgument("unknown dtype policy '" + name + "'; choose one of: " + names);
}

void set_global_policy(const Policy& policy) {
  std::lock_guard lock(global().mutex);
  global().policy = policy;
}

void set_global_policy(const std::string& name) {
  set_global_policy(Policy(name));
}

std::optional<Policy> global_policy() {
  std::lock_guard lock(global().mutex);
  return global().policy;
}

void clear_global_policy() {
  std::lock_guard lock(global().mutex);
  global().policy.reset();
}

// ---- LossScaleOptimizer ----

LossScaleOptimizer::LossScaleOptimizer(std::shared_ptr<train::Optimizer> inner,
                                       double initial_scale, std::int64_t growth_steps)
    : Optimizer(inner ? inner->learning_rate_ : train::LearningRate(0.0),
                inner ? inner->options_ : train::OptimizerOptions{}, inner ? inner->num_slots_ : 0),
      inner_(std::move(inner)),
      growth_steps_(growth_steps) {
  if (!inner_) throw InvalidArgument("LossScaleOptimizer: the inner optimizer is empty");
  if (dynamic_cast<const LossScaleOptimizer*>(inner_.get()) != nullptr) {
    throw InvalidArgument("LossScaleOptimizer: the inner optimizer already scales the loss");
  }
  if (!(initial_scale >= 1.0) || !std::isfinite(initial_scale)) {
    throw InvalidArgument("LossScaleOptimizer: initial_scale must be a finite number >= 1, got " +
                          std::to_string(initial_scale));
  }
  if (growth_steps < 1) {
    throw InvalidArgument("LossScaleOptimizer: growth_steps must be >= 1, got " +
                          std::to_string(growth_steps));
  }
  scale_ = Tensor::scalar(initial_scale, DType::f32);
  good_steps_ = Tensor::scalar(0, DType::i64);
  applied_ = Tensor::scalar(0, DType::i64);
  skipped_ = Tensor::scalar(0, DType::i64);
}

void LossScaleOptimizer::place_state(Device device) const {
  if (scale_.device() == device) return;
  for (Tensor* state : {&scale_, &good_steps_, &applied_, &skipped_})
    *state = state->to(device);
}

void LossScaleOptimizer::read_applied() const {
  known_applied_ = static_cast<std::int64_t>(applied_.item());
  unread_steps_ = 0;
}

Tensor LossScaleOptimizer::scale_loss(const Tensor& loss) const {
  place_state(loss.device());
  return loss * (loss.dtype() == scale_.dtype() ? scale_ : cast(scale_, loss.dtype()));
}

std::int64_t LossScaleOptimizer::iterations() const {
  read_applied();
  return known_applied_;
}

double LossScaleOptimizer::scale() const {
  return scale_.item();
}

std::int64_t LossScaleOptimizer::skipped_steps() const {
  return static_cast<std::int64_t>(skipped_.item());
}

std::optional<train::LossScaleState> LossScaleOptimizer::loss_scale_state() const {
  return train::LossScaleState{scale(), static_cast<std::int64_t>(good_steps_.item())};
}

void LossScaleOptimizer::set_loss_scale_state(const train::LossScaleState& state) {
  if (!(state.scale >= 1.0) || !std::isfinite(state.scale) || state.good_steps < 0) {
    throw InvalidArgument(
        "LossScaleOptimizer: a loss scale state needs scale >= 1 and "
        "good_steps >= 0, got scale " +
        std::to_string(state.scale) + ", good_steps " + std::to_string(state.good_steps));
  }
  // In place: a compiled step holds these tensors.
  tandem::detail::copy_into(scale_, Tensor::scalar(state.scale, DType::f32), "loss scale");
  tandem::detail::copy_into(good_steps_,
                            Tensor::scalar(static_cast<double>(state.good_steps), DType::i64),
                            "loss scale good steps");
}

void LossScaleOptimizer::restore_iterations(std::int64_t iterations) {
  tandem::detail::copy_into(applied_, Tensor::scalar(static_cast<double>(iterations), DType::i64),
                            "loss scale applied updates");
  known_applied_ = iterations;
  unread_steps_ = 0;
}

// Unscales every gradient and checks them all at once: the sum of a tensor is finite only if
// every element is (an inf or NaN anywhere makes it inf or NaN), so one scalar per gradient
// decides the step, on the device.
bool LossScaleOptimizer::accept_gradients(std::vector<Tensor>& gradients) {
  Tensor total;  // f32 scalar: the sum of all gradient sums
  for (Tensor& gradient : gradients) {
    if (!gradient.defined()) continue;
    place_state(gradient.device());
    const Tensor inverse = 1.0 / scale_;
    gradient =
        gradient * (gradient.dtype() == DType::f32 ? inverse : cast(inverse, gradient.dtype()));
    const Tensor gradient_sum = cast(sum(gradient), DType::f32);
    total = total.defined() ? total + gradient_sum : gradient_sum;
  }
  const Device device = scale_.device();
  const auto i64 = [&](double value) { return Tensor::scalar(value, DType::i64, device); };
  // inf - inf and NaN - NaN are NaN, which equals nothing.
  const Tensor finite = total.defined()
                            ? equal(total - total, Tensor::scalar(0, DType::f32, device))
                            : Tensor::scalar(1, DType::boolean, device);
  finite_ = cast(finite, DType::i64);
  const Tensor counted = good_steps_ + i64(1);
  const Tensor grown = greater_equal(counted, i64(static_cast<double>(growth_steps_)));
  // Doubling stops where float32 itself would overflow the scaled loss.
  const Tensor doubled = scale_ * 2.0;
  const Tensor grown_scale =
      where(less(doubled, Tensor::scalar(1e30, DType::f32, device)), doubled, scale_);
  const Tensor halved = maximum(scale_ * 0.5, Tensor::scalar(1, DType::f32, device));
  assign(scale_, where(finite, where(grown, grown_scale, scale_), halved));
  assign(good_steps_, where(finite, where(grown, i64(0), counted), i64(0)));
  assign(skipped_, skipped_ + (i64(1) - finite_));
  // Accumulating gradients (an eager-only option) keeps its host decision: an overflowing call
  // adds nothing to the sum.
  if (options().gradient_accumulation_steps > 1) return finite_.item() != 0.0;
  return true;
}

// The learning rates and steps of the next kScheduleRows updates, from the applied count the
// host last read; the device picks the row of its own count and gates it with this step's
// verdict, then counts the step if it applies.
Tensor LossScaleOptimizer::step_schedule(Device device) {
  place_state(device);
  const Tensor table = host_operand("learning rates of the next updates", {kScheduleRows, 2},
                                    DType::f64, device, [this](Tensor& host) {
                                      if (unread_steps_ == kScheduleRows - 1) read_applied();
                                      double* rows = host.data<double>();
                                      for (std::int64_t row = 0; row < kScheduleRows; ++row) {
                                        rows[2 * row] = learning_rate_.at(known_applied_ + row);
                                        rows[2 * row + 1] =
                                            static_cast<double>(known_applied_ + row + 1);
                                      }
                                      ++unread_steps_;
                                    });
  // The table's first step is the host's count + 1.
  const Tensor host_count = cast(reshape(slice(table, {0, 1}, {1, 1}), {}), DType::i64) -
                            Tensor::scalar(1, DType::i64, device);
  const Tensor picked = gather(table, applied_ - host_count);  // (2,) {learning_rate, step}
  const Tensor schedule = concat({picked, reshape(cast(finite_, DType::f64), {1})}, 0);
  assign(applied_, applied_ + finite_);
  return schedule;
}

void LossScaleOptimizer::update(Tensor& variable, const Tensor& gradient,
                                std::vector<Tensor>& slots, const Tensor& schedule) {
  inner_->update(variable, gradient, slots, schedule);
}

std::shared_ptr<train::Optimizer> optimizer_for_policy(
    std::shared_ptr<train::Optimizer> optimizer) {
  const std::optional<Policy> policy = global_policy();
  if (!optimizer || !policy || !policy->needs_loss_scaling()) return optimizer;
  if (dynamic_cast<const LossScaleOptimizer*>(optimizer.get()) != nullptr) return optimizer;
  return std::make_shared<LossScaleOptimizer>(std::move(optimizer));
}

}  // namespace tandem::mixed_precision
