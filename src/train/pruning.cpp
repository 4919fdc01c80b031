// Magnitude pruning (tandem/pruning.h): schedules, masks by magnitude or 2:4, and the callback
// that keeps pruned weights at zero between optimizer steps.
#include "tandem/pruning.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "tandem/autodiff.h"
#include "tandem/ops.h"
#include "train/kernel_layers.h"

namespace tandem::pruning {
namespace {

void check_steps(std::int64_t begin, std::int64_t end, std::int64_t frequency, bool open_end) {
  if (begin < 0 || frequency < 1 || (!(open_end && end == -1) && end < begin)) {
    throw InvalidArgument("pruning schedule: need 0 <= begin_step <= end_step" +
                          std::string(open_end ? " (or end_step -1: no end)" : "") +
                          " and frequency >= 1, got begin_step " + std::to_string(begin) +
                          ", end_step " + std::to_string(end) + ", frequency " +
                          std::to_string(frequency));
  }
}

void check_sparsity(double sparsity, const char* name) {
  if (!(sparsity >= 0.0 && sparsity < 1.0)) {
    throw InvalidArgument(std::string("pruning schedule: ") + name + " must be in [0, 1), got " +
                          std::to_string(sparsity));
  }
}

void check_schedule(const Schedule& schedule) {
  if (const auto* constant = std::get_if<ConstantSparsity>(&schedule)) {
    check_sparsity(constant->target_sparsity, "target_sparsity");
    check_steps(constant->begin_step, constant->end_step, constant->frequency, true);
    return;
  }
  const auto& decay = std::get<PolynomialDecay>(schedule);
  check_sparsity(decay.initial_sparsity, "initial_sparsity");
  check_sparsity(decay.final_sparsity, "final_sparsity");
  check_steps(decay.begin_step, decay.end_step, decay.frequency, false);
  if (!(decay.power > 0.0)) {
    throw InvalidArgument("pruning schedule: power must be positive, got " +
                          std::to_string(decay.power));
  }
}

// The reduction axis of a kernel, along which two_of_four groups consecutive weights: Dense's
// inputs (in, out), Conv2D's input channels (KH, KW, C_in, C_out).
std::int64_t reduction_extent(const Tensor& kernel) {
  return kernel.dim(kernel.rank() - 2);
}

// 1 for each weight kept, 0 for each pruned: the `pruned` smallest magnitudes (ties: the earlier
// index is pruned first, so masks do not depend on sort stability).
std::vector<float> magnitude_mask(const std::vector<float>& magnitudes, std::int64_t pruned) {
  std::vector<std::size_t> order(magnitudes.size());
  std::iota(order.begin(), order.end(), 0);
  std::nth_element(
      order.begin(), order.begin() + pruned, order.end(), [&](std::size_t a, std::size_t b) {
        return magnitudes[a] < magnitudes[b] || (magnitudes[a] == magnitudes[b] && a < b);
      });
  std::vector<float> mask(magnitudes.size(), 1.0f);
  for (std::int64_t i = 0; i < pruned; ++i)
    mask[order[static_cast<std::size_t>(i)]] = 0.0f;
  return mask;
}

// 2 of every 4 consecutive weights along the reduction axis: the two largest magnitudes kept.
std::vector<float> two_of_four_mask(const std::vector<float>& magnitudes, const Shape& shape) {
  const std::int64_t out = shape.back();
  const std::int64_t reduction = shape[shape.size() - 2];
  const std::int64_t outer = static_cast<std::int64_t>(magnitudes.size()) / (reduction * out);
  std::vector<float> mask(magnitudes.size(), 1.0f);
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t group = 0; group < reduction; group += 4) {
      for (std::int64_t column = 0; column < out; ++column) {
        std::array<std::size_t, 4> index{};
        for (std::int64_t k = 0; k < 4; ++k)
          index[k] = static_cast<std::size_t>((o * reduction + group + k) * out + column);
        std::sort(index.begin(), index.end(), [&](std::size_t a, std::size_t b) {
          return magnitudes[a] < magnitudes[b] || (magnitudes[a] == magnitudes[b] && a < b);
        });
        mask[index[0]] = 0.0f;
        mask[index[1]] = 0.0f;
      }
    }
  }
  return mask;
}

}  // namespace

ScheduleDecision schedule_at(const Schedule& schedule, std::int64_t step) {
  if (const auto* constant = std::get_if<ConstantSparsity>(&schedule)) {
    const bool inside =
        step >= constant->begin_step && (constant->end_step == -1 || step <= constant->end_step);
    return {inside && (step - constant->begin_step) % constant->frequency == 0,
            constant->target_sparsity};
  }
  const auto& decay = std::get<PolynomialDecay>(schedule);
  const double span =
      static_cast<double>(std::max<std::int64_t>(1, decay.end_step - decay.begin_step));
  const double progress = std::clamp(static_cast<double>(step - decay.begin_step) / span, 0.0, 1.0);
  const double sparsity = decay.final_sparsity + (decay.initial_sparsity - decay.final_sparsity) *
                                                     std::pow(1.0 - progress, decay.power);
  const bool inside = step >= decay.begin_step && step <= decay.end_step;
  return {inside && (step - decay.begin_step) % decay.frequency == 0, sparsity};
}

Pruning::Pruning(std::vector<PrunedWeight> weights, std::vector<std::string> skipped,
                 PruneOptions options)
    : weights_(std::move(weights)), skipped_(std::move(skipped)), options_(std::move(options)) {}

void Pruning::on_train_batch_begin(std::int64_t, const train::Logs&) {
  if (stripped_) return;
  const ScheduleDecision decision = schedule_at(options_.schedule, step_);
  if (decision.update) update_masks(decision.sparsity);
}

void Pruning::on_train_batch_end(std::int64_t, const train::Logs&) {
  if (stripped_) return;
  ++step_;
  // The optimizer moved the pruned weights off zero; they stay pruned.
  if (target_ > 0.0 || options_.pattern == Pattern::two_of_four) apply_masks();
}

void Pruning::update_masks(double sparsity) {
  for (PrunedWeight& pruned : weights_) {
    const Tensor& weight = pruned.weight;
    std::vector<float> magnitudes = weight.to_vector<float>();
    for (float& value : magnitudes)
      value = std::abs(value);
    const std::vector<float> mask =
        options_.pattern == Pattern::two_of_four
            ? two_of_four_mask(magnitudes, weight.shape())
            : magnitude_mask(magnitudes, static_cast<std::int64_t>(std::llround(
                                             sparsity * static_cast<double>(magnitudes.size()))));
    const Tensor ones_and_zeros = Tensor::from_vector(mask, weight.shape(), weight.device());
    pruned.mask =
        weight.dtype() == DType::f32 ? ones_and_zeros : cast(ones_and_zeros, weight.dtype());
  }
  target_ = options_.pattern == Pattern::two_of_four ? 0.5 : sparsity;
  apply_masks();
}

void Pruning::resume_at(std::int64_t step) {
  step_ = step;
  for (std::int64_t earlier = step - 1; earlier >= 0; --earlier) {
    const ScheduleDecision decision = schedule_at(options_.schedule, earlier);
    if (decision.update) {
      update_masks(decision.sparsity);
      return;
    }
  }
}

void Pruning::apply_masks() {
  NoGradGuard no_grad;
  for (PrunedWeight& pruned : weights_) {
    if (!pruned.mask.defined()) continue;
    assign(pruned.weight, mul(pruned.weight, pruned.mask));
  }
}

double Pruning::sparsity(const std::string& layer) const {
  std::int64_t zeros = 0;
  std::int64_t total = 0;
  bool found = layer.empty();
  for (const PrunedWeight& pruned : weights_) {
    if (!layer.empty() && pruned.layer != layer) continue;
    found = true;
    for (const float value : pruned.weight.to_vector<float>())
      zeros += value == 0.0f ? 1 : 0;
    total += pruned.weight.numel();
  }
  if (!found) {
    throw InvalidArgument("Pruning::sparsity: layer '" + layer + "' is not pruned");
  }
  return total == 0 ? 0.0 : static_cast<double>(zeros) / static_cast<double>(total);
}

void Pruning::strip() {
  for (PrunedWeight& pruned : weights_)
    pruned.mask = Tensor();
  stripped_ = true;
}

std::shared_ptr<Pruning> prune_low_magnitude(nn::Model& model, PruneOptions options) {
  check_schedule(options.schedule);
  std::vector<PrunedWeight> weights;
  std::vector<std::string> skipped;
  for (const train::detail::KernelLayer& found :
       train::detail::kernel_layers(model, options.layers, "prune_low_magnitude", "prune")) {
    if (options.pattern == Pattern::two_of_four && reduction_extent(found.kernel) % 4 != 0) {
      const std::string reason = found.layer.name() + ": its " +
                                 std::to_string(reduction_extent(found.kernel)) +
                                 " input channels do not come in fours (two_of_four)";
      if (found.named) throw InvalidArgument("prune_low_magnitude: layer " + reason);
      skipped.push_back(reason);
      continue;
    }
    weights.push_back({found.layer.name(), found.kernel, Tensor()});
  }
  if (weights.empty()) {
    throw InvalidArgument("prune_low_magnitude: model '" + model.name() +
                          "' has no Dense or Conv2D layer to prune" +
                          (skipped.empty() ? "" : " (" + skipped.front() + ")"));
  }
  return std::make_shared<Pruning>(std::move(weights), std::move(skipped), std::move(options));
}

void strip_pruning(Pruning& pruning) {
  pruning.strip();
}

}  // namespace tandem::pruning
