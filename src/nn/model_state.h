#pragma once
// What a Model holds: its layer graph (shared by Sequential and functional models) and, once
// compiled, its training configuration. Model's own methods live in src/nn/model.cpp; compile,
// fit, evaluate and predict in src/train/fit.cpp.
#include <memory>
#include <string>
#include <vector>

#include "tandem/nn.h"
#include "tandem/train.h"

namespace tandem {
class StepCache;
}
namespace tandem::train::detail {
class Distribution;
}

namespace tandem::nn {

struct Model::State {
  std::string name;
  bool sequential = false;
  std::vector<Layer> sequential_layers;  // a Sequential's layers, kept for building lazily

  // The graph once built, in topological order: nodes[0] is the input, `output` the result.
  SymbolicTensor input;
  SymbolicTensor output;
  std::vector<std::shared_ptr<const Node>> nodes;
  std::vector<std::vector<std::size_t>> node_inputs;  // indices into nodes
  // After evaluating node i, the values in release_after[i] are needed no more.
  std::vector<std::vector<std::size_t>> release_after;

  // Set by compile().
  std::shared_ptr<train::Optimizer> optimizer;
  std::shared_ptr<train::Loss> loss;
  std::vector<std::shared_ptr<train::Metric>> metrics;
  // The strategy's distribution when compiled inside Strategy::scope(); fit runs through it.
  std::shared_ptr<train::detail::Distribution> distribution;
  // Whether fit runs the training step compiled (CompileOptions::jit_compile), and the compiled
  // versions of it by signature.
  bool jit = false;
  // jit came from train::default_jit_compile() rather than the caller: a step that cannot be
  // traced then trains eagerly, said once, instead of being an error.
  bool jit_by_default = false;
  std::shared_ptr<StepCache> train_steps;
  // fit's running mean of the epoch's loss; here rather than in fit so a checkpoint can keep it.
  train::Mean epoch_loss{"loss"};

  int verbose = 1;
  bool stop_training = false;

  bool built() const { return !nodes.empty(); }
};

}  // namespace tandem::nn
