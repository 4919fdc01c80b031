#pragma once
// Mixed precision, as Keras does it (keras.mixed_precision): a dtype policy names the dtype a
// layer computes in and the dtype its variables are kept in. Under "mixed_bfloat16" or
// "mixed_float16" layers cast their inputs and weights to the 16-bit type and compute there
// (tensor cores on a GPU, AVX512-BF16 through oneDNN on a CPU), while the variables stay float32
// so small updates are not lost; the zoo keeps the final logits layer in float32, and the
// losses compute in float32. float16's narrow exponent needs loss scaling, which
// LossScaleOptimizer does (compile wraps the optimizer in one under "mixed_float16"):
//
//   mixed_precision::set_global_policy("mixed_bfloat16");
//   nn::Model model = nn::zoo::build("resnet50", {224, 224, 3}, 1000);  // layers take the policy
//   model.compile({.optimizer = train::SGD(0.1, 0.9), .loss = ..., .metrics = {"accuracy"}});
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/dtype.h"
#include "tandem/train.h"

namespace tandem::mixed_precision {

class Policy {
 public:
  // "float32", "mixed_bfloat16", "mixed_float16", or one dtype for both ("bfloat16",
  // "float16", "float64"). Throws InvalidArgument naming the choices.
  explicit Policy(const std::string& name = "float32");

  const std::string& name() const { return name_; }
  DType compute_dtype() const { return compute_; }
  DType variable_dtype() const { return variable_; }
  // Whether training under it needs loss scaling (float16 computation).
  bool needs_loss_scaling() const { return compute_ == DType::f16; }

  friend bool operator==(const Policy& a, const Policy& b) { return a.name_ == b.name_; }

 private:
  std::string name_;
  DType compute_ = DType::f32;
  DType variable_ = DType::f32;
};

// keras.mixed_precision.set_global_policy: layers made from now on take this policy (layers
// made before keep theirs). Until a policy is set, a layer computes in its first input's dtype.
void set_global_policy(const Policy& policy);
void set_global_policy(const std::string& name);
// The policy layers made now take; nullopt while none is set.
std::optional<Policy> global_policy();
// Forgets the global policy: new layers follow their inputs' dtype again.
void clear_global_policy();

// Dynamic loss scaling around another optimizer (keras.mixed_precision.LossScaleOptimizer):
// scale_loss multiplies the loss by the current scale before the gradients are taken, so small
// float16 gradients do not flush to zero; apply_gradients divides them by it again. A step whose
// gradients overflowed (inf or NaN) is skipped and the scale halved; after `growth_steps` clean
// steps in a row the scale doubles. The inner optimizer's learning rate, slots and options are
// used; its own state is not touched.
//
// All of it runs on the device, as ops, so a compiled step holds it and the host never waits for
// a step's gradients: the scale and the counts are tensors there, changed in place (assign); the
// update ops take a gated schedule {learning_rate, step, apply} whose apply is 0 for a skipped
// step; and since a skipped step does not count (the schedule and Adam's bias correction follow
// applied updates, as in Keras), the host passes the learning rates of the next
// kScheduleRows updates and the device picks the row of its own count. The host reads that
// count back once every kScheduleRows - 1 steps (fit reads its logs as often anyway), and when
// asked: iterations(), scale(), checkpoints.
class LossScaleOptimizer final : public train::Optimizer {
 public:
  static constexpr std::int64_t kScheduleRows = 65;

  explicit LossScaleOptimizer(std::shared_ptr<train::Optimizer> inner,
                              double initial_scale = 32768.0, std::int64_t growth_steps = 2000);

  std::string name() const override { return "LossScaleOptimizer"; }
  std::vector<std::string> slot_names() const override { return inner_->slot_names(); }
  Tensor scale_loss(const Tensor& loss) const override;
  std::optional<train::LossScaleState> loss_scale_state() const override;
  void set_loss_scale_state(const train::LossScaleState& state) override;
  // Updates applied so far (a read from the device).
  std::int64_t iterations() const override;

  const train::Optimizer& inner_optimizer() const { return *inner_; }
  // The current scale (a read from the device).
  double scale() const;
  // Steps skipped so far because their gradients overflowed (a read from the device).
  std::int64_t skipped_steps() const;

 protected:
  bool accept_gradients(std::vector<Tensor>& gradients) override;
  void update(Tensor& variable, const Tensor& gradient, std::vector<Tensor>& slots,
              const Tensor& schedule) override;
  Tensor step_schedule(Device device) override;
  void restore_iterations(std::int64_t iterations) override;

 private:
  // Moves the state to `device` (the variables') before its first step there.
  void place_state(Device device) const;
  // Reads the applied count back from the device.
  void read_applied() const;

  std::shared_ptr<train::Optimizer> inner_;
  std::int64_t growth_steps_;
  // Scalars on the device, read and written by reference inside compiled steps: the scale (f32),
  // the clean steps since it last changed, the updates applied and the steps skipped (i64).
  mutable Tensor scale_, good_steps_, applied_, skipped_;
  Tensor finite_;                           // this step's verdict, i64 1 (gradients finite) or 0
  mutable std::int64_t known_applied_ = 0;  // the applied count when last read
  mutable std::int64_t unread_steps_ = 0;   // schedules made since
};

// What compile does with an optimizer under the global policy: wrapped in a LossScaleOptimizer
// when the policy computes in float16 (and it is not one already), unchanged otherwise.
std::shared_ptr<train::Optimizer> optimizer_for_policy(std::shared_ptr<train::Optimizer> optimizer);

}  // namespace tandem::mixed_precision
