// Dtype policies and dynamic loss scaling (keras.mixed_precision).
#include "tandem/mixed_precision.h"

#include <cmath>
#include <mutex>

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
      scale_(initial_scale),
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
}

Tensor LossScaleOptimizer::scale_loss(const Tensor& loss) const {
  return loss * scale_;
}

std::optional<train::LossScaleState> LossScaleOptimizer::loss_scale_state() const {
  return train::LossScaleState{scale_, good_steps_};
}

void LossScaleOptimizer::set_loss_scale_state(const train::LossScaleState& state) {
  if (!(state.scale >= 1.0) || !std::isfinite(state.scale) || state.good_steps < 0) {
    throw InvalidArgument(
        "LossScaleOptimizer: a loss scale state needs scale >= 1 and "
        "good_steps >= 0, got scale " +
        std::to_string(state.scale) + ", good_steps " + std::to_string(state.good_steps));
  }
  scale_ = state.scale;
  good_steps_ = state.good_steps;
}

// Unscales every gradient and checks them all at once: the sum of a tensor is finite only if
// every element is (an inf or NaN anywhere makes it inf or NaN), so one scalar per gradient and
// a single read back to the host decide the step.
bool LossScaleOptimizer::accept_gradients(std::vector<Tensor>& gradients) {
  const double inverse = 1.0 / scale_;
  Tensor total;  // f32 scalar: the sum of all gradient sums
  for (Tensor& gradient : gradients) {
    if (!gradient.defined()) continue;
    gradient = gradient * inverse;
    const Tensor gradient_sum = cast(sum(gradient), DType::f32);
    total = total.defined() ? total + gradient_sum : gradient_sum;
  }
  const bool finite = !total.defined() || std::isfinite(total.item());
  if (!finite) {
    scale_ = std::max(1.0, scale_ / 2.0);
    good_steps_ = 0;
    ++skipped_steps_;
    return false;
  }
  if (++good_steps_ >= growth_steps_) {
    // Doubling stops where float32 itself would overflow the scaled loss.
    if (scale_ * 2.0 < 1e30) scale_ *= 2.0;
    good_steps_ = 0;
  }
  return true;
}

void LossScaleOptimizer::update(Tensor& variable, const Tensor& gradient,
                                std::vector<Tensor>& slots, const Tensor& schedule) {
  inner_->update(variable, gradient, slots, schedule);
}

std::string LossScaleOptimizer::untraceable_reason() const {
  return "LossScaleOptimizer (mixed_float16) checks the gradients for overflow on the host every "
         "step to skip the step and adjust the loss scale";
}

std::shared_ptr<train::Optimizer> optimizer_for_policy(
    std::shared_ptr<train::Optimizer> optimizer) {
  const std::optional<Policy> policy = global_policy();
  if (!optimizer || !policy || !policy->needs_loss_scaling()) return optimizer;
  if (dynamic_cast<const LossScaleOptimizer*>(optimizer.get()) != nullptr) return optimizer;
  return std::make_shared<LossScaleOptimizer>(std::move(optimizer));
}

}  // namespace tandem::mixed_precision
