#pragma once
// Training: losses, metrics, optimizers with learning-rate schedules, gradient clipping and
// accumulation, callbacks and the History that fit() returns. Names follow Keras
// (keras.losses, keras.metrics, keras.optimizers, keras.callbacks) so a TensorFlow user feels at
// home. Everything here works on plain tensors, so a custom training loop uses the same pieces
// as Model::fit:
//
//   GradientTape tape;
//   Tensor logits = model(x, /*training=*/true);
//   Tensor loss = loss_fn(y, logits);
//   auto grads = tape.gradient(loss, model.trainable_weights());
//   optimizer.apply_gradients(grads, model.trainable_weights());
#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::data {
struct Batch;
class BatchIterator;
class Dataset;
class Pipeline;
}  // namespace tandem::data
namespace tandem::nn {
class Model;
}
namespace tandem::mixed_precision {
class LossScaleOptimizer;
}

namespace tandem::train {

// Metric values by name ("loss", "accuracy", "val_loss", ...), as Keras passes them to callbacks.
using Logs = std::map<std::string, double>;

// An optimizer, loss or metric given as an object, a shared pointer (to keep access to it) or,
// like Keras' compile(optimizer="adam"), by name: Base::from_name resolves the name.
template <typename Base>
class Spec {
 public:
  Spec() = default;
  template <std::derived_from<Base> T>
  Spec(T value) : object_(std::make_shared<T>(std::move(value))) {}
  template <std::derived_from<Base> T>
  Spec(std::shared_ptr<T> object) : object_(std::move(object)) {}
  Spec(const std::string& name) : object_(Base::from_name(name)) {}
  Spec(const char* name) : object_(Base::from_name(name)) {}

  const std::shared_ptr<Base>& get() const { return object_; }
  explicit operator bool() const { return object_ != nullptr; }

 private:
  std::shared_ptr<Base> object_;
};

// ---------------------------------------------------------------------------------------------
// Losses: loss(y_true, y_pred) -> scalar, averaged over the batch (Keras' "sum_over_batch_size").
// ---------------------------------------------------------------------------------------------
class Loss {
 public:
  virtual ~Loss() = default;
  virtual Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const = 0;
  virtual std::string name() const = 0;
  // "sparse_categorical_crossentropy", "categorical_crossentropy", "mean_squared_error" ("mse").
  // The cross-entropies resolved by name expect probabilities (from_logits=false), as in Keras.
  static std::shared_ptr<Loss> from_name(const std::string& name);
};

// y_true (N,) integer class ids (i32 or i64), y_pred (N, C) logits or probabilities.
class SparseCategoricalCrossentropy final : public Loss {
 public:
  explicit SparseCategoricalCrossentropy(bool from_logits = false) : from_logits_(from_logits) {}
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string name() const override { return "sparse_categorical_crossentropy"; }

 private:
  bool from_logits_;
};

// y_true (N, C) one-hot or soft targets, y_pred (N, C) logits or probabilities.
class CategoricalCrossentropy final : public Loss {
 public:
  explicit CategoricalCrossentropy(bool from_logits = false) : from_logits_(from_logits) {}
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string name() const override { return "categorical_crossentropy"; }

 private:
  bool from_logits_;
};

// mean((y_pred - y_true)^2) over every element; y_true and y_pred of one shape.
class MeanSquaredError final : public Loss {
 public:
  Tensor operator()(const Tensor& y_true, const Tensor& y_pred) const override;
  std::string name() const override { return "mean_squared_error"; }
};

// Probabilities are clipped to [kProbabilityEpsilon, 1 - kProbabilityEpsilon] before the log, as
// Keras does with backend.epsilon().
inline constexpr double kProbabilityEpsilon = 1e-7;

// ---------------------------------------------------------------------------------------------
// Metrics: stateful, updated per batch, read with result(), reset at every epoch.
// ---------------------------------------------------------------------------------------------
class Metric {
 public:
  virtual ~Metric() = default;
  virtual void update_state(const Tensor& y_true, const Tensor& y_pred) = 0;
  virtual double result() const = 0;
  virtual void reset_state() = 0;
  // The key in logs and History ("accuracy", "sparse_categorical_accuracy").
  virtual std::string name() const = 0;
  // "accuracy" (Accuracy), "sparse_categorical_accuracy", "categorical_accuracy".
  static std::shared_ptr<Metric> from_name(const std::string& name);
  // The numbers behind result() (Keras' metric variables), so a checkpoint taken in the middle
  // of an epoch keeps the epoch's metrics; empty for a metric that does not expose them.
  virtual std::vector<double> variables() const { return {}; }
  // Puts back what variables() returned; throws InvalidArgument for the wrong count.
  virtual void set_variables(const std::vector<double>& values);
};

// Base of the accuracies: the fraction of matching examples since the last reset.
class MatchRate : public Metric {
 public:
  double result() const override;
  void reset_state() override;
  std::vector<double> variables() const override;  // {correct, total}
  void set_variables(const std::vector<double>& values) override;

 protected:
  void add_matches(std::int64_t correct, std::int64_t total);

 private:
  std::int64_t correct_ = 0;
  std::int64_t total_ = 0;
};

// Fraction of examples whose arg-max class equals the label; y_true (N,) or (N, 1) class ids,
// y_pred (N, C) scores (logits or probabilities: the arg-max is the same).
class SparseCategoricalAccuracy final : public MatchRate {
 public:
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  std::string name() const override { return "sparse_categorical_accuracy"; }
};

// y_true (N, C) one-hot, y_pred (N, C) scores: arg-maxes compared.
class CategoricalAccuracy final : public MatchRate {
 public:
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  std::string name() const override { return "categorical_accuracy"; }
};

// What compile(metrics={"accuracy"}) means in Keras: the accuracy that fits the targets' shape.
// Class ids against per-class scores compare the arg-max (sparse categorical); one-hot targets
// compare both arg-maxes (categorical); anything else of equal shape counts exact matches.
class Accuracy final : public MatchRate {
 public:
  void update_state(const Tensor& y_true, const Tensor& y_pred) override;
  std::string name() const override { return "accuracy"; }
};

// A running weighted mean of values (keras.metrics.Mean); fit uses one for the loss, weighted by
// batch size.
class Mean {
 public:
  explicit Mean(std::string name = "mean") : name_(std::move(name)) {}
  // Adds every element of `values` with weight 1.
  void update_state(const Tensor& values);
  void update_state(double value, double weight = 1.0);
  double result() const { return weight_ > 0 ? total_ / weight_ : 0.0; }
  void reset_state();
  const std::string& name() const { return name_; }
  // {total, weight}, as Metric::variables.
  std::vector<double> variables() const { return {total_, weight_}; }
  void set_variables(const std::vector<double>& values);

 private:
  std::string name_;
  double total_ = 0.0;
  double weight_ = 0.0;
};

// ---------------------------------------------------------------------------------------------
// Learning-rate schedules: the learning rate as a function of the optimizer's update count.
// ---------------------------------------------------------------------------------------------
class LearningRateSchedule {
 public:
  virtual ~LearningRateSchedule() = default;
  // The learning rate for update number `step` (counting from 0).
  virtual double operator()(std::int64_t step) const = 0;
};

class ConstantSchedule final : public LearningRateSchedule {
 public:
  explicit ConstantSchedule(double learning_rate);
  double operator()(std::int64_t) const override { return learning_rate_; }

 private:
  double learning_rate_;
};

// initial * decay_rate ^ floor(step / step_size): drops by `decay_rate` every `step_size` updates
// (Keras' ExponentialDecay with staircase=True).
class StepDecay final : public LearningRateSchedule {
 public:
  StepDecay(double initial_learning_rate, std::int64_t step_size, double decay_rate);
  double operator()(std::int64_t step) const override;

 private:
  double initial_;
  std::int64_t step_size_;
  double decay_rate_;
};

// Keras' CosineDecay: initial * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) /
// decay_steps)) + alpha); stays at initial * alpha after decay_steps.
class CosineDecay final : public LearningRateSchedule {
 public:
  CosineDecay(double initial_learning_rate, std::int64_t decay_steps, double alpha = 0.0);
  double operator()(std::int64_t step) const override;

 private:
  double initial_;
  std::int64_t decay_steps_;
  double alpha_;
};

// Linear warm-up in front of any schedule: for step < warmup_steps the rate climbs linearly from
// `initial_learning_rate` to after(0); from then on it is after(step - warmup_steps).
class LinearWarmup final : public LearningRateSchedule {
 public:
  LinearWarmup(std::shared_ptr<const LearningRateSchedule> after, std::int64_t warmup_steps,
               double initial_learning_rate = 0.0);
  template <std::derived_from<LearningRateSchedule> S>
  LinearWarmup(S after, std::int64_t warmup_steps, double initial_learning_rate = 0.0)
      : LinearWarmup(std::make_shared<S>(std::move(after)), warmup_steps, initial_learning_rate) {}
  double operator()(std::int64_t step) const override;

 private:
  std::shared_ptr<const LearningRateSchedule> after_;
  std::int64_t warmup_steps_;
  double initial_;
};

// A learning rate: a number (constant) or a schedule.
class LearningRate {
 public:
  LearningRate(double value);
  template <std::derived_from<LearningRateSchedule> S>
  LearningRate(S schedule) : schedule_(std::make_shared<S>(std::move(schedule))) {}
  LearningRate(std::shared_ptr<const LearningRateSchedule> schedule);

  double at(std::int64_t step) const { return (*schedule_)(step); }
  const LearningRateSchedule& schedule() const { return *schedule_; }

 private:
  std::shared_ptr<const LearningRateSchedule> schedule_;
};

// ---------------------------------------------------------------------------------------------
// Gradient clipping.
// ---------------------------------------------------------------------------------------------
struct ClippedGradients {
  std::vector<Tensor> gradients;
  Tensor global_norm;  // scalar: the norm before clipping
};
// Scales every gradient by clip_norm / max(global_norm, clip_norm), where global_norm is the L2
// norm of all gradients together (tf.clip_by_global_norm). Undefined gradients stay undefined.
// Computed with ops on the gradients' device; nothing is copied to the host.
ClippedGradients clip_by_global_norm(const std::vector<Tensor>& gradients, double clip_norm);

// ---------------------------------------------------------------------------------------------
// Optimizers. Slots (momentum, Adam moments) are created lazily per variable; every update runs
// the in-place update ops (sgd_update, adam_update) on the variables' device, untaped.
// ---------------------------------------------------------------------------------------------
struct OptimizerOptions {
  // > 0: clip the gradients to this global norm before each update (Keras' global_clipnorm).
  double global_clipnorm = 0.0;
  // > 1: sum the gradients of this many apply_gradients calls and update with their mean on the
  // last one (Keras 3's gradient_accumulation_steps); the calls in between change no variable.
  std::int64_t gradient_accumulation_steps = 1;
};

// Dynamic loss scaling's state (mixed_float16 training): the current scale and the clean steps
// since it last changed. An optimizer that scales the loss reports it, so checkpoints keep it.
struct LossScaleState {
  double scale = 1.0;
  std::int64_t good_steps = 0;
};

// What a checkpoint keeps of an optimizer, for the variables it was asked about, in their order.
struct OptimizerState {
  std::int64_t iterations = 0;
  // apply_gradients calls since the last update while accumulating gradients.
  std::int64_t accumulated_calls = 0;
  // Per variable: its slots (none before its first update) and its pending gradient sum
  // (undefined when nothing is accumulated).
  std::vector<std::vector<Tensor>> slots;
  std::vector<Tensor> accumulated;
  std::optional<LossScaleState> loss_scale;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  // Movable, not copyable: a copy would share the slot tensors that updates change in place.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;
  Optimizer(Optimizer&&) noexcept = default;
  Optimizer& operator=(Optimizer&&) noexcept = default;

  // gradients[i] is d loss / d variables[i]; an undefined gradient (a variable the loss does not
  // depend on) leaves that variable alone, as Keras does.
  void apply_gradients(const std::vector<Tensor>& gradients, const std::vector<Tensor>& variables);

  // Updates applied so far (accumulating calls do not count); drives schedules and Adam's bias
  // correction.
  virtual std::int64_t iterations() const { return iterations_; }
  // The rate the next update uses.
  double learning_rate() const { return learning_rate_.at(iterations()); }
  void set_learning_rate(LearningRate learning_rate) { learning_rate_ = std::move(learning_rate); }
  const OptimizerOptions& options() const { return options_; }
  virtual std::string name() const = 0;

  // "sgd", "adam", "adamw" with Keras' default arguments.
  static std::shared_ptr<Optimizer> from_name(const std::string& name);

  // The slots' names in update() order, as Keras 3 names them: {"momentum", "velocity"} for Adam.
  virtual std::vector<std::string> slot_names() const;
  // A copy of the state for `variables` (copies: training goes on changing the live tensors).
  OptimizerState state(const std::vector<Tensor>& variables) const;
  // Puts back a state taken for the same variables in the same order; throws InvalidArgument
  // naming the variable whose slots do not fit it.
  void load_state(const std::vector<Tensor>& variables, const OptimizerState& state);
  // Loss scaling, for optimizers that scale the loss (none of the plain ones do).
  virtual std::optional<LossScaleState> loss_scale_state() const { return std::nullopt; }
  // Throws InvalidArgument unless the optimizer scales the loss.
  virtual void set_loss_scale_state(const LossScaleState& state);
  // The loss to take gradients of (Keras 3's Optimizer.scale_loss): the loss itself, or, for an
  // optimizer that scales the loss, the loss times its scale.
  virtual Tensor scale_loss(const Tensor& loss) const { return loss; }
  // Why this optimizer's step cannot run inside a compiled step (tandem/compile.h), or empty
  // when it can: a decision the host makes from the step's values, which a graph traced once
  // cannot repeat.
  virtual std::string untraceable_reason() const;

 protected:
  Optimizer(LearningRate learning_rate, OptimizerOptions options, int num_slots);
  // Called by apply_gradients before anything else with the gradients it was given: may change
  // them (loss scaling divides by its scale) or return false to skip the step (loss scaling
  // while accumulating gradients, when they overflowed). The default accepts them as they are.
  virtual bool accept_gradients(std::vector<Tensor>& gradients) { return true; }
  // One variable's update; `slots` holds num_slots tensors shaped like the variable (zeros at
  // first); `schedule` is the step's {learning_rate, step} operand (update_schedule in
  // tandem/ops.h), step counting from 1, shared by every variable of the step.
  virtual void update(Tensor& variable, const Tensor& gradient, std::vector<Tensor>& slots,
                      const Tensor& schedule) = 0;
  // The step's schedule operand on `device`: by default {learning_rate, step} filled on the host
  // for each step (advancing the iteration count); an optimizer that decides on the device
  // whether a step applies (loss scaling) makes a gated one (update_schedule in tandem/ops.h).
  virtual Tensor step_schedule(Device device);
  // Sets the iteration count a checkpoint restores.
  virtual void restore_iterations(std::int64_t iterations) { iterations_ = iterations; }

 private:
  void apply_now(const std::vector<Tensor>& gradients, const std::vector<Tensor>& variables);

  LearningRate learning_rate_;
  OptimizerOptions options_;
  int num_slots_;
  std::int64_t iterations_ = 0;
  std::unordered_map<std::uint64_t, std::vector<Tensor>> slots_;  // by variable id
  std::int64_t accumulated_calls_ = 0;
  std::unordered_map<std::uint64_t, Tensor> accumulated_;  // by variable id

  // Wraps another optimizer: runs its update() with its learning rate and slot count.
  friend class mixed_precision::LossScaleOptimizer;
};

// Keras' SGD: velocity = momentum * velocity - lr * g; variable += velocity (Nesterov:
// variable += momentum * velocity - lr * g). Without momentum: variable -= lr * g.
class SGD final : public Optimizer {
 public:
  explicit SGD(LearningRate learning_rate = 0.01, double momentum = 0.0, bool nesterov = false,
               OptimizerOptions options = {});
  std::string name() const override { return "SGD"; }
  std::vector<std::string> slot_names() const override;

 protected:
  void update(Tensor& variable, const Tensor& gradient, std::vector<Tensor>& slots,
              const Tensor& schedule) override;

 private:
  double momentum_;
  bool nesterov_;
};

// Adam (Kingma & Ba) with Keras' defaults and update: m and v are the moment estimates,
// lr_t = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) and variable -= lr_t * m / (sqrt(v) + epsilon)
// (epsilon on the uncorrected sqrt(v), as Keras).
class Adam : public Optimizer {
 public:
  explicit Adam(LearningRate learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
                double epsilon = 1e-7, OptimizerOptions options = {});
  std::string name() const override { return "Adam"; }
  std::vector<std::string> slot_names() const override { return {"momentum", "velocity"}; }

 protected:
  Adam(LearningRate learning_rate, double weight_decay, double beta_1, double beta_2,
       double epsilon, OptimizerOptions options);
  void update(Tensor& variable, const Tensor& gradient, std::vector<Tensor>& slots,
              const Tensor& schedule) override;

 private:
  double weight_decay_;
  double beta_1_;
  double beta_2_;
  double epsilon_;
};

// Adam with decoupled weight decay (Loshchilov & Hutter): each update first shrinks the variable
// by lr * weight_decay * variable. Keras 3's defaults.
class AdamW final : public Adam {
 public:
  explicit AdamW(LearningRate learning_rate = 0.001, double weight_decay = 0.004,
                 double beta_1 = 0.9, double beta_2 = 0.999, double epsilon = 1e-7,
                 OptimizerOptions options = {});
  std::string name() const override { return "AdamW"; }
};

// ---------------------------------------------------------------------------------------------
// Callbacks: hooks that fit calls, in Keras' order: on_train_begin, then per epoch
// on_epoch_begin, per step on_train_batch_begin / on_train_batch_end, on_epoch_end (logs with
// val_ entries when there is validation data), and finally on_train_end. Epochs and batches
// count from 0, as in Keras.
// ---------------------------------------------------------------------------------------------
struct TrainingParams {
  int epochs = 0;
  std::int64_t steps = 0;  // steps per epoch
  int verbose = 0;
  std::int64_t batch_size = 0;  // examples per step (the last of an epoch may have fewer)
  std::int64_t examples = 0;    // examples per epoch; 0 or less: not known in advance
};

// At least every this many steps fit reads the losses and metrics of the steps since the last
// read (Callback::reads_logs_at_batch_end): a bound on what the unread steps hold.
inline constexpr std::int64_t kMaxUnreadSteps = 64;

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(const Logs& logs) {}
  virtual void on_train_end(const Logs& logs) {}
  virtual void on_epoch_begin(int epoch, const Logs& logs) {}
  virtual void on_epoch_end(int epoch, const Logs& logs) {}
  virtual void on_train_batch_begin(std::int64_t batch, const Logs& logs) {}
  virtual void on_train_batch_end(std::int64_t batch, const Logs& logs) {}
  // Whether on_train_batch_end reads the model's weights (a checkpoint every N steps does).
  // Where the weights live on an accelerator between steps (the XLA strategies), fit brings
  // them back to the model before the batch end of such a callback, and otherwise only at the
  // end of each epoch and of training. Callbacks that only read the logs say false.
  virtual bool reads_weights_at_batch_end() const { return true; }
  // Whether on_train_batch_end of `batch` reads the logs. fit reads the steps' losses and
  // metrics from their device (a host sync on a GPU) only for a batch end at which some callback
  // does, at the end of an epoch, and at least every kMaxUnreadSteps steps; the logs given to
  // a batch end that no callback reads hold the values of the last read. The progress bar reads
  // them when it redraws, TensorBoard every update_freq steps.
  virtual bool reads_logs_at_batch_end(std::int64_t batch) const { return true; }

  // Set by fit before on_train_begin.
  void set_model(nn::Model* model) { model_ = model; }
  void set_params(const TrainingParams& params) { params_ = params; }
  nn::Model* model() const { return model_; }
  const TrainingParams& params() const { return params_; }

 private:
  nn::Model* model_ = nullptr;
  TrainingParams params_;
};

// What fit returns: the per-epoch logs (history()["loss"][epoch], as in Keras) and the timing.
//
// Throughput: samples_per_sec() is the steady-state training throughput, examples / seconds over
// the training steps that follow the first warmup_steps() steps of the run (counted across
// epochs). A step's time is the wall time of one iteration of the training loop: fetching the
// batch, the forward and backward pass, the optimizer update, the metric updates and the batch
// callbacks. Validation and epoch-end work belong to no step. Unless FitOptions::warmup_steps
// says otherwise, the warm-up is min(10, 5% of the planned steps, rounded down), so short runs
// keep most of their steps; the same definition is used for every framework the benchmark
// compares.
class History final : public Callback {
 public:
  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }
  void on_train_begin(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

  // Per-epoch values by log key: history()["val_accuracy"][epoch].
  const std::map<std::string, std::vector<double>>& history() const { return history_; }
  const std::vector<int>& epochs() const { return epochs_; }
  // Wall seconds of each epoch, training and validation together.
  const std::vector<double>& epoch_seconds() const { return epoch_seconds_; }
  // Wall seconds of every training step, per epoch.
  const std::vector<std::vector<double>>& step_seconds() const { return step_seconds_; }
  // Examples in every training step, per epoch (the last batch of an epoch may be short).
  const std::vector<std::vector<std::int64_t>>& step_examples() const { return step_examples_; }
  std::int64_t warmup_steps() const { return warmup_steps_; }
  // Steady-state examples per second after the warm-up (0 when no step followed it).
  double samples_per_sec() const;
  // Seconds and examples of the steps after the warm-up.
  double timed_seconds() const;
  std::int64_t timed_examples() const;

  // Input: the seconds each training step waited for its batch (part of its step time), per
  // epoch; the share of the timed steps' time (after the warm-up) spent waiting, which fit warns
  // about above 10%; bad elements the dataset skipped in each epoch (data::OnError::skip); and
  // the input pipeline's most likely fix, from its statistics of the last epoch.
  const std::vector<std::vector<double>>& step_input_wait_seconds() const {
    return step_input_wait_seconds_;
  }
  double input_wait_share() const;
  const std::vector<std::int64_t>& skipped_elements() const { return skipped_elements_; }
  const std::string& input_advice() const { return input_advice_; }

  // Called by fit: the warm-up length, each step's time, size and wait for its batch as it
  // finishes, and what the dataset reported at the end of each epoch.
  void set_warmup_steps(std::int64_t steps) { warmup_steps_ = steps; }
  void record_step(double seconds, std::int64_t examples, double input_wait_seconds = 0.0);
  void record_input_report(std::int64_t skipped, std::string advice);
  // How many times fit read the steps' losses and metrics from their device, and for how many
  // steps in all (Callback::reads_logs_at_batch_end).
  void record_log_read(std::int64_t steps) {
    ++log_reads_;
    steps_read_ += steps;
  }
  std::int64_t log_reads() const { return log_reads_; }
  std::int64_t steps_read() const { return steps_read_; }

 private:
  std::map<std::string, std::vector<double>> history_;
  std::vector<int> epochs_;
  std::vector<double> epoch_seconds_;
  std::vector<std::vector<double>> step_seconds_;
  std::vector<std::vector<std::int64_t>> step_examples_;
  std::vector<std::vector<double>> step_input_wait_seconds_;
  std::vector<std::int64_t> skipped_elements_;
  std::string input_advice_;
  std::int64_t warmup_steps_ = 0;
  double epoch_start_ = 0.0;
  std::int64_t log_reads_ = 0;
  std::int64_t steps_read_ = 0;
};

// Stops training when `monitor` has not improved by more than min_delta for `patience` epochs.
// mode "auto" maximises monitors whose name contains "acc" and minimises the rest. With
// restore_best_weights, stopping puts back the weights of the best epoch.
class EarlyStopping final : public Callback {
 public:
  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }
  explicit EarlyStopping(std::string monitor = "val_loss", double min_delta = 0.0, int patience = 0,
                         std::string mode = "auto", bool restore_best_weights = false);
  void on_train_begin(const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

  // The epoch (from 0) after which training stopped, or -1 when it ran to the end.
  int stopped_epoch() const { return stopped_epoch_; }
  int best_epoch() const { return best_epoch_; }
  double best() const { return best_; }

 private:
  bool improved(double value) const;

  std::string monitor_;
  double min_delta_;
  int patience_;
  bool maximize_;
  bool restore_best_weights_;
  double best_ = 0.0;
  int best_epoch_ = -1;
  int wait_ = 0;
  int stopped_epoch_ = -1;
  std::vector<Tensor> best_weights_;
};

// Sets the optimizer's learning rate at the start of every epoch to schedule(epoch, current).
class LearningRateScheduler final : public Callback {
 public:
  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }
  using ScheduleFn = std::function<double(int epoch, double learning_rate)>;
  explicit LearningRateScheduler(ScheduleFn schedule, int verbose = 0);
  void on_epoch_begin(int epoch, const Logs& logs) override;

 private:
  ScheduleFn schedule_;
  int verbose_;
};

// Training that diverged: the loss became NaN or infinite (TerminateOnNaN).
class NonFiniteLoss : public Error {
 public:
  using Error::Error;
};

// Ends training when the loss becomes NaN or infinite, as Keras' TerminateOnNaN does, but with an
// error (NonFiniteLoss) rather than quietly: a script sees the failure, and no checkpoint or
// saved model of the broken weights follows. Put it before a ModelCheckpoint (a run does). It
// looks at the logs fit reads anyway, so it costs no extra read from the device: fit reads them
// at least every kMaxUnreadSteps steps, at every step a checkpoint is written and at each
// epoch's end, so the divergence is caught before a checkpoint of it is written. The message
// names the step, the last finite loss seen and what to try.
class TerminateOnNaN final : public Callback {
 public:
  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }
  void on_train_begin(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  void check(const Logs& logs, const std::string& where);

  int epoch_ = 0;
  std::int64_t step_ = 0;  // of the whole run, from 1 (a resumed run's count on)
  std::optional<double> last_finite_;
  std::int64_t last_finite_step_ = 0;
};

// A callback made of functions (keras.callbacks.LambdaCallback); unset ones do nothing.
class LambdaCallback final : public Callback {
 public:
  struct Functions {
    std::function<void(const Logs&)> on_train_begin;
    std::function<void(const Logs&)> on_train_end;
    std::function<void(int, const Logs&)> on_epoch_begin;
    std::function<void(int, const Logs&)> on_epoch_end;
    std::function<void(std::int64_t, const Logs&)> on_train_batch_begin;
    std::function<void(std::int64_t, const Logs&)> on_train_batch_end;
  };
  explicit LambdaCallback(Functions functions) : functions_(std::move(functions)) {}
  bool reads_logs_at_batch_end(std::int64_t) const override {
    return static_cast<bool>(functions_.on_train_batch_end);
  }
  void on_train_begin(const Logs& logs) override;
  void on_train_end(const Logs& logs) override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;

 private:
  Functions functions_;
};

// Keras' progress bar. verbose 1: "Epoch 1/3" then
//   469/469 ━━━━━━━━━━━━━━━━━━━━ 4s 9ms/step - accuracy: 0.8213 - loss: 0.5123
// redrawn in place (at most every `interval_seconds`) on a terminal, printed once per epoch
// otherwise; verbose 2: one "469/469 - 4s - 9ms/step - ..." line per epoch. Epoch-end lines carry
// the val_ metrics. fit adds one by itself when its verbosity is above 0 and none is among its
// callbacks.
class ProgressBar final : public Callback {
 public:
  bool reads_weights_at_batch_end() const override { return false; }
  // When the bar redraws (at most every interval_seconds on a terminal; never mid-epoch
  // elsewhere).
  bool reads_logs_at_batch_end(std::int64_t batch) const override;
  // interactive: redraw in place; nullopt asks whether `out` is std::cout on a terminal.
  explicit ProgressBar(int verbose = 1, std::ostream* out = nullptr,
                       std::optional<bool> interactive = std::nullopt,
                       double interval_seconds = 0.1);
  ~ProgressBar() override;
  void on_epoch_begin(int epoch, const Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override;
  void on_epoch_end(int epoch, const Logs& logs) override;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// ---------------------------------------------------------------------------------------------
// Model::compile and Model::fit arguments.
// ---------------------------------------------------------------------------------------------
struct CompileOptions {
  Spec<Optimizer> optimizer = "adam";
  Spec<Loss> loss;
  std::vector<Spec<Metric>> metrics;
  // Keras' jit_compile: whether fit and train_on_batch run the training step compiled
  // (tandem/compile.h: traced once per batch signature, then run as one planned graph). Unset:
  // Tandem's default, train::default_jit_compile() for the device it trains on. true where the
  // step cannot be compiled (a gradient-accumulating optimizer, a distribution
  // strategy with several replicas, an op traced steps refuse) is an error naming why.
  std::optional<bool> jit_compile;
};

// Whether Model::compile compiles the training step when CompileOptions::jit_compile is unset
// and the step can be compiled, for a model trained on `device`: on the CPU, where compiled
// steps give the same results, bit for bit, faster (1.24x on the tutorial CNN) and in 0.65x the
// step memory (README, Compiled steps), and on CUDA GPUs, where the step is replayed as one CUDA
// graph (4.0x eager on the tutorial CNN, 1.34x on ResNet-50 in bf16 on an H200, the same
// accuracy); not on XLA devices, whose strategies compile the step with XLA. Under the default,
// a step that cannot be traced trains eagerly, said once on the compile log; jit_compile = true
// makes it an error.
bool default_jit_compile(const Device& device);

// Model::fit's arguments by name, as Keras names them and in Keras' order:
//   model.fit(dataset, {.epochs = 10, .callbacks = {checkpoints}});
//   model.fit(x, y, {.batch_size = 64, .epochs = 10, .validation_split = 0.1});
struct FitOptions {
  // Tensors only: examples per step (unset: 32, Keras' default). A dataset has its batches
  // already; giving a batch size with one is an error, as in Keras.
  std::optional<std::int64_t> batch_size;
  int epochs = 1;
  // Overrides Model::set_verbose for this call: 0 silent, 1 progress bar, 2 one line per epoch.
  std::optional<int> verbose;
  std::vector<std::shared_ptr<Callback>> callbacks;
  // Tensors only: the last fraction of the examples (taken before shuffling, as Keras does) held
  // out and evaluated at the end of every epoch, as val_<name> in the logs.
  double validation_split = 0.0;
  // Evaluated at the end of every epoch; its results appear as val_<name> in the logs.
  const data::Dataset* validation_data = nullptr;
  // Tensors only: reorder the training examples every epoch, drawing from `seed`. (A dataset
  // shuffles as its own pipeline says.)
  bool shuffle = true;
  std::uint64_t seed = 0;
  // Steps excluded from History::samples_per_sec; see History for the default.
  std::optional<std::int64_t> warmup_steps;
  // Resuming (Keras' initial_epoch): the epoch to start at, and how many of its batches were
  // trained already; those are drawn from the dataset and skipped, so the run continues on the
  // batch it stopped before. With initial_step > 0 the epoch's loss and metrics carry on from
  // their current state (which io::restore_checkpoint sets) instead of starting from zero.
  int initial_epoch = 0;
  std::int64_t initial_step = 0;
};

// The default warm-up for a run of `total_steps` steps: min(10, total_steps / 20).
std::int64_t default_warmup_steps(std::int64_t total_steps);

// batches.next() inside an input_wait span (tandem/spans.h), as Model::fit fetches its batches;
// for custom loops. Include tandem/data.h to use it.
std::optional<data::Batch> next_batch(data::BatchIterator& batches);
// How long the calling thread's last next_batch() waited for its batch, in seconds: what a
// training step spent waiting for input (the TensorBoard callback's input-wait share).
double last_input_wait_seconds();

// The largest batch size in [1, most] for which `fits` returns true, starting from `first`:
// doubling while it fits, halving while it does not, then bisecting between the last size that
// fitted and the first that did not. `fits` trains a step or two at the size and returns false
// when it runs out of memory (OutOfMemory; set_memory_limit emulates a smaller device). Each
// trial is logged to `log` when given. Throws Error when not even one example fits.
std::int64_t find_max_batch(std::int64_t first, std::int64_t most,
                            const std::function<bool(std::int64_t)>& fits, std::ostream* log);

// find_max_batch for a training run (tandem train --find-max-batch): each trial trains a fresh
// model (with its optimizer's slots) for two steps of the run's own input pipeline at that batch
// size, then the epoch's last partial batch while a pass over the full pipeline holds its
// buffers, so the data held in memory (the shuffle buffer, the batches made ahead) and a
// compiled step's plans count as they will in training. Under a memory limit the trials leave 2%
// of it to what training holds beyond them (the batches the pipeline makes ahead grow as it runs).
// Call it in the strategy's scope.
struct MaxBatchSearch {
  std::int64_t first = 1;     // the run's batch size per replica: the search starts there
  std::int64_t examples = 0;  // training examples an epoch
  int replicas = 1;           // the global batch is a batch per replica x replicas
  int epochs = 1;             // of the run, for the model's learning-rate schedule
  // The run's training batches at a global batch size: of its whole training split when
  // `first_examples` is 0, else of its first `first_examples` examples (no validation split).
  std::function<data::Pipeline(std::int64_t global_batch, std::int64_t first_examples)> input;
  // A fresh model, compiled as the run compiles it, for `steps` training steps in all.
  std::function<nn::Model(std::int64_t steps)> model;
  std::vector<Device> devices;  // whose memory limit the trials lower by 2%
  std::size_t memory_limit = 0;
};
// The largest batch per replica that fits; each trial logged to `log` when given.
std::int64_t search_max_batch(const MaxBatchSearch& search, std::ostream* log);

}  // namespace tandem::train
