// Optimizers (keras.optimizers): per-variable slots created on first use, gradient clipping by
// global norm and gradient accumulation, then the in-place update ops on the variables' device.
#include <algorithm>
#include <cmath>

#include "core/tensor_copy.h"
#include "core/text.h"
#include "tandem/autodiff.h"
#include "tandem/ops.h"
#include "tandem/train.h"

namespace tandem::train {
namespace {

std::string variable_label(const Tensor& variable, std::size_t index) {
  return variable.name().empty() ? "variable " + std::to_string(index)
                                 : "variable '" + variable.name() + "'";
}

void require_unit_interval(const char* optimizer, const char* what, double value) {
  if (!(value >= 0.0 && value < 1.0)) {
    throw InvalidArgument(std::string(optimizer) + ": " + what + " must be in [0, 1), got " +
                          std::to_string(value));
  }
}

}  // namespace

ClippedGradients clip_by_global_norm(const std::vector<Tensor>& gradients, double clip_norm) {
  if (!(clip_norm > 0.0)) {
    throw InvalidArgument("clip_by_global_norm: clip_norm must be > 0, got " +
                          std::to_string(clip_norm));
  }
  Tensor squared_total;  // scalar, in the first gradient's dtype
  for (const Tensor& gradient : gradients) {
    if (!gradient.defined()) continue;
    Tensor squared = sum(square(gradient));
    if (!squared_total.defined()) {
      squared_total = squared;
    } else {
      if (squared.dtype() != squared_total.dtype()) squared = cast(squared, squared_total.dtype());
      squared_total = add(squared_total, squared);
    }
  }
  if (!squared_total.defined()) return {gradients, Tensor::scalar(0.0)};
  const Tensor global_norm = sqrt(squared_total);
  const Tensor limit = scalar_like(global_norm, clip_norm);
  const Tensor scale = div(limit, maximum(global_norm, limit));  // 1 when within the limit
  ClippedGradients clipped{{}, global_norm};
  clipped.gradients.reserve(gradients.size());
  for (const Tensor& gradient : gradients) {
    if (!gradient.defined()) {
      clipped.gradients.emplace_back();
      continue;
    }
    clipped.gradients.push_back(
        mul(gradient, scale.dtype() == gradient.dtype() ? scale : cast(scale, gradient.dtype())));
  }
  return clipped;
}

// ---- Optimizer ----

Optimizer::Optimizer(LearningRate learning_rate, OptimizerOptions options, int num_slots)
    : learning_rate_(std::move(learning_rate)), options_(options), num_slots_(num_slots) {
  if (!(options.global_clipnorm >= 0.0)) {
    throw InvalidArgument("optimizer: global_clipnorm must be >= 0 (0 turns clipping off), got " +
                          std::to_string(options.global_clipnorm));
  }
  if (options.gradient_accumulation_steps < 1) {
    throw InvalidArgument("optimizer: gradient_accumulation_steps must be >= 1, got " +
                          std::to_string(options.gradient_accumulation_steps));
  }
}

Optimizer::~Optimizer() = default;

std::shared_ptr<Optimizer> Optimizer::from_name(const std::string& name) {
  const std::string key = lower(name);
  if (key == "sgd") return std::make_shared<SGD>();
  if (key == "adam") return std::make_shared<Adam>();
  if (key == "adamw") return std::make_shared<AdamW>();
  throw InvalidArgument("unknown optimizer '" + name +
                        "'; choose sgd, adam or adamw, or pass a train::Optimizer object");
}

std::vector<std::string> Optimizer::slot_names() const {
  std::vector<std::string> names;
  for (int i = 0; i < num_slots_; ++i)
    names.push_back("slot_" + std::to_string(i));
  return names;
}

OptimizerState Optimizer::state(const std::vector<Tensor>& variables) const {
  OptimizerState saved;
  saved.iterations = iterations();
  saved.accumulated_calls = accumulated_calls_;
  saved.loss_scale = loss_scale_state();
  for (const Tensor& variable : variables) {
    std::vector<Tensor> copies;
    if (const auto found = slots_.find(variable.id()); found != slots_.end()) {
      for (const Tensor& slot : found->second)
        copies.push_back(slot.clone());
    }
    saved.slots.push_back(std::move(copies));
    const auto pending = accumulated_.find(variable.id());
    saved.accumulated.push_back(pending != accumulated_.end() ? pending->second.clone() : Tensor());
  }
  return saved;
}

void Optimizer::load_state(const std::vector<Tensor>& variables, const OptimizerState& state) {
  const std::string where = name() + ".load_state: ";
  if (state.slots.size() != variables.size() || state.accumulated.size() != variables.size()) {
    throw InvalidArgument(where + "the state holds " + std::to_string(state.slots.size()) +
                          " variables' slots but " + std::to_string(variables.size()) +
                          " variables were given; restore it into the model it was saved from");
  }
  if (state.iterations < 0 || state.accumulated_calls < 0 ||
      state.accumulated_calls >= options_.gradient_accumulation_steps) {
    throw InvalidArgument(where + "iterations " + std::to_string(state.iterations) +
                          " and accumulated calls " + std::to_string(state.accumulated_calls) +
                          " do not fit an optimizer accumulating over " +
                          std::to_string(options_.gradient_accumulation_steps) + " steps");
  }
  auto require_like = [&](const Tensor& value, const Tensor& variable, std::size_t index,
                          const std::string& what) {
    if (value.shape() != variable.shape() || value.dtype() != variable.dtype()) {
      throw InvalidArgument(where + "the " + what + " of " + variable_label(variable, index) +
                            " is " + dtype_name(value.dtype()) + " " + shape_str(value.shape()) +
                            " but the variable is " + dtype_name(variable.dtype()) + " " +
                            shape_str(variable.shape()));
    }
  };
  const std::vector<std::string> names = slot_names();
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const std::vector<Tensor>& slots = state.slots[i];
    if (!slots.empty() && static_cast<int>(slots.size()) != num_slots_) {
      throw InvalidArgument(where + variable_label(variables[i], i) + " has " +
                            std::to_string(slots.size()) + " slots in the state but " + name() +
                            " keeps " + std::to_string(num_slots_) +
                            "; restore the state into the optimizer it was saved from");
    }
    for (std::size_t k = 0; k < slots.size(); ++k)
      require_like(slots[k], variables[i], i, names[k] + " slot");
    if (state.accumulated[i].defined()) {
      require_like(state.accumulated[i], variables[i], i, "accumulated gradient");
    }
  }
  if (state.loss_scale) set_loss_scale_state(*state.loss_scale);
  // Everything fits: replace the state, with copies of our own on each variable's device.
  restore_iterations(state.iterations);
  accumulated_calls_ = state.accumulated_calls;
  // Slots that exist take the values in place: a compiled step holds them by reference.
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const std::uint64_t id = variables[i].id();
    const Device device = variables[i].device();
    accumulated_.erase(id);
    const auto existing = slots_.find(id);
    if (!state.slots[i].empty() && existing != slots_.end() &&
        existing->second.size() == state.slots[i].size()) {
      for (std::size_t k = 0; k < state.slots[i].size(); ++k)
        tandem::detail::copy_into(existing->second[k], state.slots[i][k], where + "slot");
    } else {
      slots_.erase(id);
      if (!state.slots[i].empty()) {
        std::vector<Tensor>& slots = slots_[id];
        for (const Tensor& slot : state.slots[i])
          slots.push_back(slot.to(device).clone());
      }
    }
    if (state.accumulated[i].defined()) accumulated_[id] = state.accumulated[i].to(device).clone();
  }
}

// The learning rate and step as an operand the host fills for each step, advancing the iteration
// count as it does: inside a compiled step this runs before every run of the graph, so a schedule
// (or a LearningRateScheduler callback) never recompiles it.
Tensor Optimizer::step_schedule(Device device) {
  return host_operand("learning rate and step", {2}, DType::f64, device, [this](Tensor& host) {
    double* values = host.data<double>();
    values[0] = learning_rate_.at(iterations_);
    values[1] = static_cast<double>(iterations_ + 1);
    ++iterations_;
  });
}

std::string Optimizer::untraceable_reason() const {
  if (options_.gradient_accumulation_steps == 1) return "";
  return name() + " accumulates gradients over " +
         std::to_string(options_.gradient_accumulation_steps) +
         " steps and decides on the host at which step to apply them";
}

void Optimizer::set_loss_scale_state(const LossScaleState&) {
  throw InvalidArgument(name() +
                        " does not scale the loss, so it cannot take a loss-scale state; restore "
                        "the checkpoint into a model compiled with the loss-scaling optimizer "
                        "(mixed_float16) it was saved from");
}

void Optimizer::apply_gradients(const std::vector<Tensor>& gradients,
                                const std::vector<Tensor>& variables) {
  if (gradients.size() != variables.size()) {
    throw InvalidArgument(name() + ".apply_gradients: got " + std::to_string(gradients.size()) +
                          " gradients for " + std::to_string(variables.size()) +
                          " variables; pass one gradient per variable (undefined for none)");
  }
  for (std::size_t i = 0; i < variables.size(); ++i) {
    if (!variables[i].defined()) {
      throw InvalidArgument(name() + ".apply_gradients: variable " + std::to_string(i) +
                            " is undefined");
    }
    const Tensor& gradient = gradients[i];
    if (gradient.defined() &&
        (gradient.shape() != variables[i].shape() || gradient.dtype() != variables[i].dtype())) {
      throw InvalidArgument(name() + ".apply_gradients: the gradient of " +
                            variable_label(variables[i], i) + " is " +
                            dtype_name(gradient.dtype()) + " " + shape_str(gradient.shape()) +
                            " but the variable is " + dtype_name(variables[i].dtype()) + " " +
                            shape_str(variables[i].shape()));
    }
  }
  if (tracing()) {
    if (const std::string why = untraceable_reason(); !why.empty()) {
      throw InvalidArgument(name() +
                            ".apply_gradients cannot be traced into a compiled step: " + why +
                            "; run the step eagerly (tandem train --jit off, "
                            "CompileOptions::jit_compile = false)");
    }
  }
  // Updates change variables in place; no tape may record them as part of a computation.
  NoGradGuard no_grad;
  std::vector<Tensor> accepted = gradients;
  if (!accept_gradients(accepted)) return;
  const std::int64_t steps = options_.gradient_accumulation_steps;
  if (steps == 1) {
    apply_now(accepted, variables);
    return;
  }
  for (std::size_t i = 0; i < variables.size(); ++i) {
    if (!accepted[i].defined()) continue;
    auto [entry, inserted] = accumulated_.try_emplace(variables[i].id(), accepted[i]);
    if (!inserted) entry->second = add(entry->second, accepted[i]);
  }
  if (++accumulated_calls_ < steps) return;
  std::vector<Tensor> averaged(variables.size());
  for (std::size_t i = 0; i < variables.size(); ++i) {
    auto entry = accumulated_.find(variables[i].id());
    if (entry != accumulated_.end())
      averaged[i] = entry->second * (1.0 / static_cast<double>(steps));
  }
  accumulated_.clear();
  accumulated_calls_ = 0;
  apply_now(averaged, variables);
}

void Optimizer::apply_now(const std::vector<Tensor>& gradients,
                          const std::vector<Tensor>& variables) {
  const bool clip = options_.global_clipnorm > 0.0;
  std::vector<Tensor> clipped;
  if (clip) clipped = clip_by_global_norm(gradients, options_.global_clipnorm).gradients;
  const std::vector<Tensor>& effective = clip ? clipped : gradients;
  const Tensor schedule = step_schedule(variables.front().device());
  for (std::size_t i = 0; i < variables.size(); ++i) {
    if (!effective[i].defined()) continue;
    std::vector<Tensor>& slots = slots_[variables[i].id()];
    while (static_cast<int>(slots.size()) < num_slots_) {
      slots.push_back(
          Tensor::zeros(variables[i].shape(), variables[i].dtype(), variables[i].device()));
    }
    // A handle of our own: the update op may rebind it to its in-place output.
    Tensor variable = variables[i];
    update(variable, effective[i], slots, schedule);
  }
}

// ---- SGD ----

SGD::SGD(LearningRate learning_rate, double momentum, bool nesterov, OptimizerOptions options)
    : Optimizer(std::move(learning_rate), options, momentum > 0.0 ? 1 : 0),
      momentum_(momentum),
      nesterov_(nesterov) {
  require_unit_interval("SGD", "momentum", momentum);
}

std::vector<std::string> SGD::slot_names() const {
  if (momentum_ > 0.0) return {"momentum"};
  return {};
}

void SGD::update(Tensor& variable, const Tensor& gradient, std::vector<Tensor>& slots,
                 const Tensor& schedule) {
  Tensor no_velocity;
  sgd_update(variable, gradient, slots.empty() ? no_velocity : slots[0], schedule,
             SgdOptions{.momentum = momentum_, .nesterov = nesterov_, .weight_decay = 0.0});
}

// ---- Adam and AdamW ----

Adam::Adam(LearningRate learning_rate, double beta_1, double beta_2, double epsilon,
           OptimizerOptions options)
    : Adam(std::move(learning_rate), 0.0, beta_1, beta_2, epsilon, options) {}

Adam::Adam(LearningRate learning_rate, double weight_decay, double beta_1, double beta_2,
           double epsilon, OptimizerOptions options)
    : Optimizer(std::move(learning_rate), options, 2),
      weight_decay_(weight_decay),
      beta_1_(beta_1),
      beta_2_(beta_2),
      epsilon_(epsilon) {
  require_unit_interval("Adam", "beta_1", beta_1);
  require_unit_interval("Adam", "beta_2", beta_2);
  if (!(epsilon > 0.0)) {
    throw InvalidArgument("Adam: epsilon must be > 0, got " + std::to_string(epsilon));
  }
  if (!(weight_decay >= 0.0)) {
    throw InvalidArgument("AdamW: weight_decay must be >= 0, got " + std::to_string(weight_decay));
  }
}

void Adam::update(Tensor& variable, const Tensor& gradient, std::vector<Tensor>& slots,
                  const Tensor& schedule) {
  adam_update(
      variable, gradient, slots[0], slots[1], schedule,
      AdamOptions{
          .beta1 = beta_1_, .beta2 = beta_2_, .epsilon = epsilon_, .weight_decay = weight_decay_});
}

AdamW::AdamW(LearningRate learning_rate, double weight_decay, double beta_1, double beta_2,
             double epsilon, OptimizerOptions options)
    : Adam(std::move(learning_rate), weight_decay, beta_1, beta_2, epsilon, options) {}

}  // namespace tandem::train
