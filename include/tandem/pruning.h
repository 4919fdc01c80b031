#pragma once
// Magnitude pruning during training, with the TensorFlow Model Optimization Toolkit's names and
// behaviour (tfmot.sparsity.keras): prune_low_magnitude picks the kernels of Dense and Conv2D
// layers, a schedule says when and how sparse (ConstantSparsity, PolynomialDecay with begin and
// end steps and a frequency), and the returned callback (UpdatePruningStep's part) counts the
// steps, recomputes the masks at the schedule's steps (the smallest weights by magnitude are
// zeroed) and keeps pruned weights at zero after every optimizer step. Pattern two_of_four prunes
// 2 of every 4 consecutive weights along the reduction axis (input channels), the structured
// sparsity NVIDIA's sparse tensor cores run. The zeros stay in the weights, so a pruned model
// saves, exports and compresses as any other; strip_pruning ends the pruning.
//
//   auto pruning = pruning::prune_low_magnitude(
//       model, {.schedule = pruning::PolynomialDecay{.final_sparsity = 0.8, .end_step = 2000}});
//   model.fit(data, {.epochs = epochs, .callbacks = {pruning}});
//   pruning::strip_pruning(*pruning);
#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "tandem/nn.h"
#include "tandem/train.h"

namespace tandem::pruning {

// The same sparsity from begin_step on (end_step -1: no end), masks updated every `frequency`
// steps within [begin_step, end_step].
struct ConstantSparsity {
  double target_sparsity = 0.5;
  std::int64_t begin_step = 0;
  std::int64_t end_step = -1;
  std::int64_t frequency = 100;
};

// From initial_sparsity at begin_step to final_sparsity at end_step along
// final + (initial - final) * (1 - progress)^power, as TF-MOT's PolynomialDecay: fast at first,
// gently at the end, when the network has adapted.
struct PolynomialDecay {
  double initial_sparsity = 0.0;
  double final_sparsity = 0.5;
  std::int64_t begin_step = 0;
  std::int64_t end_step = 1000;
  double power = 3.0;
  std::int64_t frequency = 100;
};

using Schedule = std::variant<ConstantSparsity, PolynomialDecay>;

// What the schedule does at `step` (counted from 0): whether the masks are recomputed there, and
// to what sparsity.
struct ScheduleDecision {
  bool update = false;
  double sparsity = 0.0;
};
ScheduleDecision schedule_at(const Schedule& schedule, std::int64_t step);

enum class Pattern { unstructured, two_of_four };

struct PruneOptions {
  Schedule schedule = ConstantSparsity{};
  Pattern pattern = Pattern::unstructured;
  // The layers to prune, by name; empty: every Dense and Conv2D (under two_of_four, those whose
  // input channels come in fours; the others are listed by Pruning::skipped()).
  std::vector<std::string> layers;
};

// One pruned kernel and its mask (1 kept, 0 pruned; the weight's shape and dtype).
struct PrunedWeight {
  std::string layer;
  Tensor weight;
  Tensor mask;
};

class Pruning final : public train::Callback {
 public:
  Pruning(std::vector<PrunedWeight> weights, std::vector<std::string> skipped,
          PruneOptions options);

  void on_train_batch_begin(std::int64_t batch, const train::Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const train::Logs& logs) override;
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }

  const std::vector<PrunedWeight>& weights() const { return weights_; }
  // "conv2d: its 1 input channel does not come in fours (two_of_four)".
  const std::vector<std::string>& skipped() const { return skipped_; }
  // The training steps counted so far (TF-MOT's pruning_step).
  std::int64_t step() const { return step_; }
  // The sparsity the masks were last computed for (0 before the first update).
  double target_sparsity() const { return target_; }
  // The fraction of a pruned layer's kernel that is zero now; of every pruned kernel together
  // with an empty name.
  double sparsity(const std::string& layer = "") const;
  // Recomputes every mask for `sparsity` (two_of_four: the pattern) and zeroes the pruned weights.
  void update_masks(double sparsity);
  // A run resumed at training step `step` (from a checkpoint, whose weights hold the zeros): the
  // step count goes on from there, with the masks of the schedule's last update before it.
  void resume_at(std::int64_t step);
  // Ends the pruning: the masks are dropped and later steps leave the weights alone; the zeros
  // stay.
  void strip();
  bool stripped() const { return stripped_; }

 private:
  void apply_masks();

  std::vector<PrunedWeight> weights_;
  std::vector<std::string> skipped_;
  PruneOptions options_;
  std::int64_t step_ = 0;
  double target_ = 0.0;
  bool stripped_ = false;
};

// Prepares `model` (built) for pruning; add the result to fit's callbacks. Throws InvalidArgument
// naming a layer that is not in the model or has no kernel to prune, a sparsity outside [0, 1),
// a schedule whose steps are out of order, or a layer two_of_four cannot prune.
std::shared_ptr<Pruning> prune_low_magnitude(nn::Model& model, PruneOptions options = {});

// TF-MOT's strip_pruning: ends `pruning` (see Pruning::strip).
void strip_pruning(Pruning& pruning);

// A training run's pruning, as a run configures it (tandem train --prune S ...).
struct PruningRecipe {
  double sparsity = 0.0;  // the target, in (0, 1); 0: no pruning
  // polynomial: from 0 to the target over the first three quarters of the run (TF-MOT's
  // PolynomialDecay with power 3), then training goes on at the target, to recover; constant:
  // the target from the first step.
  std::string schedule = "polynomial";
  // unstructured, or 2:4 (two of every four weights along the input channels: sparsity 0.5).
  std::string pattern = "unstructured";
  std::vector<std::string> layers;  // empty: every Dense and Conv2D
};

// The pruning callback for a run of `total_steps` steps, masks updated every
// min(100, total / 20) steps; null when the recipe prunes nothing.
std::shared_ptr<Pruning> make_pruning(const PruningRecipe& recipe, nn::Model& model,
                                      std::int64_t total_steps);

}  // namespace tandem::pruning
