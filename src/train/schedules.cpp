// Learning-rate schedules (keras.optimizers.schedules), as functions of the update count.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "tandem/train.h"

namespace tandem::train {
namespace {

void require_rate(const char* schedule, const char* what, double value) {
  if (!(value >= 0.0) || !std::isfinite(value)) {
    throw InvalidArgument(std::string(schedule) + ": " + what +
                          " must be a finite number >= 0, got " + std::to_string(value));
  }
}

void require_steps(const char* schedule, const char* what, std::int64_t steps,
                   std::int64_t minimum) {
  if (steps < minimum) {
    throw InvalidArgument(std::string(schedule) + ": " + what + " must be >= " +
                          std::to_string(minimum) + ", got " + std::to_string(steps));
  }
}

}  // namespace

ConstantSchedule::ConstantSchedule(double learning_rate) : learning_rate_(learning_rate) {
  require_rate("learning rate", "the value", learning_rate);
}

StepDecay::StepDecay(double initial_learning_rate, std::int64_t step_size, double decay_rate)
    : initial_(initial_learning_rate), step_size_(step_size), decay_rate_(decay_rate) {
  require_rate("StepDecay", "initial_learning_rate", initial_learning_rate);
  require_steps("StepDecay", "step_size", step_size, 1);
  require_rate("StepDecay", "decay_rate", decay_rate);
}

double StepDecay::operator()(std::int64_t step) const {
  return initial_ *
         std::pow(decay_rate_, static_cast<double>(std::max<std::int64_t>(step, 0) / step_size_));
}

CosineDecay::CosineDecay(double initial_learning_rate, std::int64_t decay_steps, double alpha)
    : initial_(initial_learning_rate), decay_steps_(decay_steps), alpha_(alpha) {
  require_rate("CosineDecay", "initial_learning_rate", initial_learning_rate);
  require_steps("CosineDecay", "decay_steps", decay_steps, 1);
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    throw InvalidArgument("CosineDecay: alpha must be in [0, 1], got " + std::to_string(alpha));
  }
}

double CosineDecay::operator()(std::int64_t step) const {
  const double progress = static_cast<double>(std::clamp<std::int64_t>(step, 0, decay_steps_)) /
                          static_cast<double>(decay_steps_);
  const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return initial_ * ((1.0 - alpha_) * cosine + alpha_);
}

LinearWarmup::LinearWarmup(std::shared_ptr<const LearningRateSchedule> after,
                           std::int64_t warmup_steps, double initial_learning_rate)
    : after_(std::move(after)), warmup_steps_(warmup_steps), initial_(initial_learning_rate) {
  if (!after_) throw InvalidArgument("LinearWarmup: the schedule to warm up into is null");
  require_steps("LinearWarmup", "warmup_steps", warmup_steps, 0);
  require_rate("LinearWarmup", "initial_learning_rate", initial_learning_rate);
}

double LinearWarmup::operator()(std::int64_t step) const {
  if (step >= warmup_steps_) return (*after_)(step - warmup_steps_);
  const double target = (*after_)(0);
  const double fraction =
      static_cast<double>(std::max<std::int64_t>(step, 0)) / static_cast<double>(warmup_steps_);
  return initial_ + (target - initial_) * fraction;
}

LearningRate::LearningRate(double value) : schedule_(std::make_shared<ConstantSchedule>(value)) {}

LearningRate::LearningRate(std::shared_ptr<const LearningRateSchedule> schedule)
    : schedule_(std::move(schedule)) {
  if (!schedule_) throw InvalidArgument("LearningRate: the schedule is null");
}

}  // namespace tandem::train
