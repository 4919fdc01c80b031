#pragma once
// How Model::fit trains under a distribution strategy. The train layer defines this interface and
// src/distribute implements it (the strategies live in a layer above train, so fit reaches them
// only through it). A model compiled inside Strategy::scope() keeps the strategy's Distribution;
// fit then runs each step through it instead of on one device.
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "tandem/autodiff.h"
#include "tandem/tensor.h"
#include "tandem/train.h"

namespace tandem::data {
class Dataset;
}
namespace tandem::nn {
class Model;
}

namespace tandem::train::detail {

// One replica's share of a training step, as fit's train_step sees it.
class ReplicaStep {
 public:
  virtual ~ReplicaStep() = default;
  // Given to the gradient tape: sees each gradient as soon as the backward pass finishes it, so
  // its all-reduce can start while the pass goes on. Empty when the strategy does not overlap.
  virtual GradientTape::GradientReady gradient_ready() = 0;
  // Replaces `gradients` (of `variables`, in that order) with the mean gradient over the global
  // batch. Returns false when this replica must not apply them: another replica of the process
  // applies the update for all of them.
  virtual bool reduce(std::vector<Tensor>& gradients, const std::vector<Tensor>& variables) = 0;
};

// Runs fit's training step on one replica's examples (x and y on the replica's device) and
// returns its predictions and loss.
using ReplicaStepFn =
    std::function<std::pair<Tensor, Tensor>(const Tensor& x, const Tensor& y, ReplicaStep& step)>;

class Distribution {
 public:
  virtual ~Distribution() = default;
  // The worker that reports: the progress bar and results are shown by it alone.
  virtual bool is_chief() const = 0;
  // Called as fit starts, with the model and the run about to train. Before the first step runs,
  // the strategy builds the model for the step's inputs, puts its weights on the replicas'
  // devices, checks that every worker trains the same configuration and gives every replica rank
  // 0's weights (on the first step's batch, so no batch is drawn twice).
  virtual void prepare(nn::Model& model, const data::Dataset& dataset, int epochs) = 0;
  // One training step on a global batch (x, y as the dataset yields them): each replica trains on
  // its share through `run_replica`. Returns the predictions for the whole global batch (on the
  // host, in batch order) and the loss over it.
  virtual std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& y, const Loss& loss,
                                         const ReplicaStepFn& run_replica) = 0;
  // Where evaluate and predict run the model: the first replica's device.
  virtual Device input_device() const = 0;
  // Whether the step is one replica's with nothing combined across replicas, so that fit can
  // run it compiled (CompileOptions::jit_compile): the run_replica step it is given then
  // ignores the ReplicaStep.
  virtual bool single_replica() const { return false; }
  // Whether the strategy traces and compiles the whole step itself (XLA): fit then gives it the
  // eager step to trace, whatever CompileOptions::jit_compile says.
  virtual bool compiles_steps() const { return false; }
  // For strategies whose weights live on devices between steps: brings the model's weights,
  // slots and statistics up to date on the host (before callbacks, evaluation and the end of
  // fit read them), and, after callbacks that may have set them, has the next step take the
  // host's values again.
  virtual void weights_to_host() {}
  virtual void weights_from_host() {}
};

// The distribution that models compiled now on this thread train under (none: plain fit).
std::shared_ptr<Distribution> current_distribution();

// Makes `distribution` current on this thread for its lifetime (Strategy::scope()).
class DistributionScope {
 public:
  explicit DistributionScope(std::shared_ptr<Distribution> distribution);
  ~DistributionScope();
  DistributionScope(const DistributionScope&) = delete;
  DistributionScope& operator=(const DistributionScope&) = delete;

 private:
  std::shared_ptr<Distribution> previous_;
};

}  // namespace tandem::train::detail
