// fold_batch_norms (tandem/nn.h): the model rebuilt for inference with each BatchNormalization
// that only normalises a Conv2D's or Dense's output folded into that layer's kernel and bias.
#include <map>
#include <string_view>

#include "tandem/nn.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

// class_name() is a C string: compared as a string_view, never as a pointer.
std::string_view kind_of(const Layer& layer) {
  return layer.impl().class_name();
}

bool has_kernel(const Layer& layer) {
  return kind_of(layer) == "Conv2D" || kind_of(layer) == "Dense";
}

}  // namespace

Model fold_batch_norms(const Model& model) {
  if (!model.built()) {
    throw InvalidArgument("fold_batch_norms: model '" + model.name() +
                          "' is not built; build it or load it first");
  }
  const std::vector<std::shared_ptr<const Node>>& nodes = model.nodes();
  // How many nodes read each node's output, and the model output's node.
  std::map<const Node*, int> readers;
  for (const auto& node : nodes) {
    for (const SymbolicTensor& input : node->inputs)
      ++readers[input.node().get()];
  }
  const Node* output = nodes.back().get();
  // A Conv2D/Dense node whose only reader is a BatchNormalization: the pair becomes one layer.
  std::map<const Node*, const Node*> folded_into;  // the batch norm node -> its kernel node
  for (const auto& node : nodes) {
    if (!node->layer.defined() || kind_of(node->layer) != "BatchNormalization") continue;
    const Node* source = node->inputs.front().node().get();
    if (source->layer.defined() && has_kernel(source->layer) && readers[source] == 1 &&
        source != output) {
      folded_into[node.get()] = source;
    }
  }
  std::map<const LayerBase*, Layer> made;  // each layer made once (shared layers stay shared)
  std::map<const Node*, SymbolicTensor> values;
  std::vector<std::pair<Layer, std::vector<Tensor>>> weights;  // the new layers' weights
  const Node& input = *nodes.front();
  values[&input] =
      Input(Shape(input.shape.begin() + 1, input.shape.end()), input.dtype, input.name);
  const auto folds = [&](const Node* node) {
    for (const auto& [norm, source] : folded_into) {
      if (source == node) return norm;
    }
    return static_cast<const Node*>(nullptr);
  };
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    const Node* node = nodes[i].get();
    if (const auto folded = folded_into.find(node); folded != folded_into.end()) {
      values[node] = values.at(folded->second);  // the kernel layer already normalises
      continue;
    }
    const Layer& layer = node->layer;
    const std::optional<LayerConfig> config = layer.impl().config();
    if (!config) {
      throw InvalidArgument("fold_batch_norms: layer '" + layer.name() + "' (" +
                            layer.impl().class_name() +
                            ") is a custom layer without a config; it cannot be rebuilt");
    }
    const Node* norm = folds(node);
    auto [it, fresh] = made.try_emplace(&layer.impl(), Layer());
    if (fresh) {
      LayerConfig new_config = *config;
      std::vector<Tensor> new_weights = layer.weights();
      if (norm != nullptr) {
        // y = gamma (x W + b - mean) / sqrt(var + eps) + beta, per output channel.
        const std::vector<Tensor> bn = norm->layer.weights();  // gamma, beta, mean, variance
        const double epsilon = std::get<double>(norm->layer.impl().config()->at("epsilon"));
        const Tensor scale = bn[0] * rsqrt(bn[3] + epsilon);  // (C,)
        const Tensor bias = new_weights.size() == 2
                                ? new_weights[1]
                                : Tensor::zeros(bn[1].shape(), bn[1].dtype(), bn[1].device());
        new_weights = {new_weights[0] * scale, (bias - bn[2]) * scale + bn[1]};
        new_config["use_bias"] = true;
      }
      it->second = make_layer(layer.impl().class_name(), layer.name(), new_config);
      it->second.impl().set_dtype_policy(layer.impl().dtype_policy());
      weights.emplace_back(it->second, std::move(new_weights));
    }
    std::vector<SymbolicTensor> inputs;
    for (const SymbolicTensor& source : node->inputs)
      inputs.push_back(values.at(source.node().get()));
    values[node] = inputs.size() == 1 ? it->second(inputs.front()) : it->second(inputs);
  }
  Model folded(values.at(nodes.front().get()), values.at(output), model.name());
  for (const auto& [layer, values_of_layer] : weights)
    layer.set_weights(values_of_layer);
  for (Tensor weight : folded.weights())
    weight.set_constant(true);
  return folded;
}

}  // namespace tandem::nn
