// Keras files, as TensorFlow 2.15 (Keras 2.15) writes and reads them:
//   - export_keras writes a .keras archive (stored zip): metadata.json, config.json (the model as
//     a Functional config of Keras' layers) and model.weights.h5 (HDF5: layers/<group>/vars/<i>,
//     the layer's weights in Keras' order, which is Tandem's; the group named as keras_groups
//     says);
//   - load_keras_weights reads a .keras archive's model.weights.h5, or a legacy .h5 of
//     model.save (under model_weights/) or save_weights (at the root), where each layer group
//     lists its weights in the attribute weight_names and the root lists the layers in
//     layer_names.
// Weights pair with the model's layers (by name in an .h5, by kind and order in a .keras file)
// and must agree in count and shape.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/files.h"
#include "core/tensor_copy.h"
#include "io/hdf5_file.h"
#include "io/layer_config.h"
#include "io/weight_match.h"
#include "io/zip.h"
#include "tandem/io.h"
#include "tandem/ops.h"
#include "tandem/quantization.h"

namespace tandem::io {
namespace {

using nlohmann::json;
constexpr const char* kKerasVersion = "2.15.0";
constexpr const char* kWeightsMember = "model.weights.h5";
constexpr const char* kExporter = "export_keras";

// The layer kinds Keras has under the same name and arguments, and whether Keras' config takes
// a data_format for it.
const std::map<std::string, bool>& keras_layers() {
  static const std::map<std::string, bool> kinds{{"Conv2D", true},
                                                 {"Dense", false},
                                                 {"MaxPooling2D", true},
                                                 {"AveragePooling2D", true},
                                                 {"GlobalAveragePooling2D", true},
                                                 {"Flatten", true},
                                                 {"BatchNormalization", false},
                                                 {"Activation", false},
                                                 {"Dropout", false},
                                                 {"Add", false}};
  return kinds;
}

json keras_layer(const nn::Layer& layer) {
  const std::string kind = layer.impl().class_name();
  const auto known = keras_layers().find(kind);
  if (known == keras_layers().end()) {
    throw InvalidArgument(std::string(kExporter) + ": layer '" + layer.name() + "' (" + kind +
                          ") has no Keras translation yet; export the model as ONNX or "
                          "Tandem's own format instead");
  }
  json config = detail::config_json(detail::builtin_config(layer, kExporter, "Keras"));
  config["name"] = layer.name();
  config["trainable"] = layer.trainable();
  config["dtype"] = "float32";
  if (known->second) config["data_format"] = "channels_last";
  return {{"module", "keras.layers"},
          {"class_name", kind},
          {"config", config},
          {"registered_name", nullptr},
          {"name", layer.name()}};
}

// Keras' Functional config of the model: an InputLayer, then every node with the layer nodes it
// takes ([layer, node index, tensor index, kwargs]).
json functional_config(const nn::Model& model, const std::string& input_name) {
  Shape batch_shape = model.input_shape();  // (-1, ...)
  json batch_input_shape = json::array({nullptr});
  for (std::size_t axis = 1; axis < batch_shape.size(); ++axis)
    batch_input_shape.push_back(batch_shape[axis]);
  json layers = json::array();
  layers.push_back({{"module", "keras.layers"},
                    {"class_name", "InputLayer"},
                    {"config",
                     {{"batch_input_shape", batch_input_shape},
                      {"dtype", "float32"},
                      {"sparse", false},
                      {"ragged", false},
                      {"name", input_name}}},
                    {"registered_name", nullptr},
                    {"name", input_name},
                    {"inbound_nodes", json::array()}});
  const std::vector<std::shared_ptr<const nn::Node>>& nodes = model.nodes();
  // Each node as (layer name, its call count before this one): Keras' node index.
  std::map<const nn::Node*, std::pair<std::string, int>> node_names{
      {nodes.front().get(), {input_name, 0}}};
  std::map<std::string, int> calls;
  std::map<std::string, std::size_t> entry_of;
  for (std::size_t i = 1; i < nodes.size(); ++i) {
    const nn::Layer& layer = nodes[i]->layer;
    json inbound = json::array();
    for (const nn::SymbolicTensor& source : nodes[i]->inputs) {
      const auto& [name, index] = node_names.at(source.node().get());
      inbound.push_back({name, index, 0, json::object()});
    }
    node_names[nodes[i].get()] = {layer.name(), calls[layer.name()]++};
    if (const auto seen = entry_of.find(layer.name()); seen != entry_of.end()) {
      layers[seen->second]["inbound_nodes"].push_back(inbound);  // a shared layer's next call
      continue;
    }
    json entry = keras_layer(layer);
    entry["inbound_nodes"] = json::array({inbound});
    entry_of[layer.name()] = layers.size();
    layers.push_back(entry);
  }
  const auto& [output_name, output_index] = node_names.at(nodes.back().get());
  return {{"module", "keras.src.engine.functional"},
          {"class_name", "Functional"},
          {"config",
           {{"name", model.name()},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", json::array({json::array({input_name, 0, 0})})},
            {"output_layers", json::array({json::array({output_name, output_index, 0})})}}},
          {"registered_name", "Functional"},
          {"build_config", {{"input_shape", batch_input_shape}}}};
}

// Keras' snake case of a class name, as its saving library names a layer's weights group:
// "MaxPooling2D" -> "max_pooling2d", "BatchNormalization" -> "batch_normalization".
std::string snake_case(const std::string& name) {
  std::string out;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool upper = c >= 'A' && c <= 'Z';
    const bool starts_word = i + 1 < name.size() && name[i + 1] >= 'a' && name[i + 1] <= 'z';
    const bool after_lower = i > 0 && name[i - 1] >= 'a' && name[i - 1] <= 'z';
    if (upper && i > 0 && (starts_word || after_lower)) out += '_';
    out += upper ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

// The order of Keras 2.15's model.layers for a Functional model (Functional._map_graph_network),
// whatever order the layers were made in: by depth, the longest path to the output, deepest
// first; layers of one depth in the order a depth-first walk from the output, each node's inputs
// in order, first meets them. A chain keeps its order; branches made in another order (a layer
// made before the layer that feeds it) do not.
std::vector<nn::Layer> keras_layer_order(const nn::Model& model) {
  std::vector<const nn::Node*> decreasing_depth;  // each node after its inputs
  std::set<const nn::Node*> finished;
  std::map<std::string, std::size_t> met;  // layer name -> when the walk first met it
  std::map<std::string, nn::Layer> layers;
  const std::function<void(const nn::Node*)> walk = [&](const nn::Node* node) {
    if (finished.contains(node)) return;
    if (node->layer.defined()) {
      met.try_emplace(node->layer.name(), met.size());
      layers.try_emplace(node->layer.name(), node->layer);
    }
    for (const nn::SymbolicTensor& input : node->inputs)
      walk(input.node().get());
    finished.insert(node);
    decreasing_depth.push_back(node);
  };
  walk(model.nodes().back().get());
  std::map<const nn::Node*, int> node_depth;
  std::map<std::string, int> layer_depth;
  for (auto node = decreasing_depth.rbegin(); node != decreasing_depth.rend(); ++node) {
    int depth = node_depth[*node];
    if ((*node)->layer.defined()) {
      int& of_layer = layer_depth[(*node)->layer.name()];
      depth = std::max(depth, of_layer);
      of_layer = depth;
    }
    node_depth[*node] = depth;
    for (const nn::SymbolicTensor& input : (*node)->inputs) {
      int& of_input = node_depth[input.node().get()];
      of_input = std::max(of_input, depth + 1);
    }
  }
  std::vector<std::string> names;
  for (const auto& [name, when] : met)
    names.push_back(name);
  std::sort(names.begin(), names.end(), [&](const std::string& a, const std::string& b) {
    if (layer_depth.at(a) != layer_depth.at(b)) return layer_depth.at(a) > layer_depth.at(b);
    return met.at(a) < met.at(b);
  });
  std::vector<nn::Layer> ordered;
  for (const std::string& name : names)
    ordered.push_back(layers.at(name));
  return ordered;
}

// Where a .keras file keeps each layer's weights: Keras' saving library walks model.layers in
// order (keras_layer_order) and names each group by its class, numbered from the second of a
// class on ("dense", "dense_1", ...), not by the layer's own name. A Functional model's InputLayer
// comes first, as "input_layer".
std::vector<std::pair<nn::Layer, std::string>> keras_groups(const nn::Model& model) {
  std::map<std::string, int> used{{"input_layer", 0}};
  std::vector<std::pair<nn::Layer, std::string>> groups;
  for (const nn::Layer& layer : keras_layer_order(model)) {
    const std::string base = snake_case(layer.impl().class_name());
    const auto [it, first] = used.try_emplace(base, 0);
    if (!first) ++it->second;
    groups.emplace_back(layer,
                        "layers/" + (first ? base : base + "_" + std::to_string(it->second)));
  }
  return groups;
}

std::string date_saved() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d@%H:%M:%S", &local);
  return text;
}

// Keras' weights of each layer, by layer name, in the layer's order.
using KerasWeights = std::map<std::string, std::vector<Tensor>>;

// A .keras file's weights, by the model's layer names (through keras_groups).
KerasWeights weights_of_keras_archive(const detail::Hdf5File& file, const nn::Model& model) {
  KerasWeights weights;
  for (const auto& [layer, group] : keras_groups(model)) {
    const std::string vars = group + "/vars";
    if (!file.exists(vars)) continue;
    std::vector<Tensor>& values = weights[layer.name()];
    for (std::size_t i = 0; file.exists(vars + "/" + std::to_string(i)); ++i)
      values.push_back(file.read(vars + "/" + std::to_string(i)));
  }
  return weights;
}

KerasWeights weights_of_legacy_h5(const detail::Hdf5File& file) {
  // model.save puts the weights under model_weights/; save_weights at the root.
  const std::string base = file.exists("model_weights") ? "model_weights" : ".";
  KerasWeights weights;
  for (const std::string& layer : file.string_attribute(base, "layer_names")) {
    const std::string group = base + "/" + layer;
    std::vector<Tensor>& values = weights[layer];
    for (const std::string& weight : file.string_attribute(group, "weight_names"))
      values.push_back(file.read(group + "/" + weight));
  }
  return weights;
}

}  // namespace

namespace {

// The model as a Functional model of Keras' layers (model.to_json()'s object); refuses an unbuilt
// model.
json keras_config(const nn::Model& model) {
  if (!model.built()) {
    throw InvalidArgument(std::string(kExporter) + ": model '" + model.name() +
                          "' is not built; build it or run it on data first");
  }
  std::string input_name = "input_1";
  for (const nn::Layer& layer : model.layers()) {
    if (layer.name() == input_name) input_name += "_input";
  }
  return functional_config(model, input_name);
}

}  // namespace

std::string keras_json(const nn::Model& model) {
  return keras_config(model).dump();
}

void export_keras(const nn::Model& model, const std::string& path) {
  const json config = keras_config(model);
  if (!quantization::quantized_inputs(model).empty()) {
    throw InvalidArgument(std::string(kExporter) + ": model '" + model.name() +
                          "' is quantised to int8, and a .keras file holds float weights; export "
                          "it as ONNX (QDQ form), or export the model saved before quantising");
  }
  for (const Tensor& weight : model.weights()) {
    if (weight.dtype() != DType::f32) {
      throw InvalidArgument(std::string(kExporter) + ": weight '" + weight.name() + "' is " +
                            dtype_name(weight.dtype()) +
                            "; a .keras export holds float32 weights (cast them first)");
    }
  }

  detail::Hdf5File weights = detail::Hdf5File::create(path + "'s " + kWeightsMember);
  weights.create_group("vars");
  weights.create_group("layers/input_layer/vars");
  for (const auto& [layer, group] : keras_groups(model)) {
    const std::string vars = group + "/vars";
    weights.create_group(vars);
    const std::vector<Tensor> values = layer.weights();
    for (std::size_t i = 0; i < values.size(); ++i)
      weights.write(vars + "/" + std::to_string(i), values[i]);
  }
  const std::vector<std::uint8_t> h5 = weights.bytes();
  const json metadata = {{"keras_version", kKerasVersion}, {"date_saved", date_saved()}};
  const std::vector<std::uint8_t> archive =
      detail::zip_archive({{"metadata.json", metadata.dump()},
                           {"config.json", config.dump()},
                           {kWeightsMember, std::string(h5.begin(), h5.end())}});
  write_file_atomically(path, archive);
}

void load_keras_weights(nn::Model& model, const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_whole_file(path);
  const bool archive = detail::is_zip(bytes);
  const bool hdf5 = bytes.size() >= 8 && bytes[0] == 0x89 && bytes[1] == 'H' && bytes[2] == 'D' &&
                    bytes[3] == 'F';
  if (!archive && !hdf5) {
    throw IoError(path +
                  ": neither a .keras archive nor an HDF5 file; pass what Keras' "
                  "model.save or save_weights wrote");
  }
  KerasWeights stored;
  if (archive) {
    const std::string member = detail::zip_member(bytes, kWeightsMember, path);
    stored = weights_of_keras_archive(
        detail::Hdf5File::open(std::vector<std::uint8_t>(member.begin(), member.end()),
                               path + "'s " + kWeightsMember),
        model);
  } else {
    stored = weights_of_legacy_h5(detail::Hdf5File::open(bytes, path));
  }
  // Every check first, then the copies: a mismatch leaves the model as it was.
  std::vector<std::pair<Tensor, Tensor>> copies;
  for (const nn::Layer& layer : model.layers()) {
    const std::vector<Tensor> weights = layer.weights();
    if (weights.empty()) continue;
    const auto found = stored.find(layer.name());
    if (found == stored.end()) {
      throw IoError(path + ": no weights for layer '" + layer.name() +
                    "'; the file was written for another model (layers pair by name in an .h5, "
                    "by kind and order in a .keras file)");
    }
    if (found->second.size() != weights.size()) {
      throw IoError(path + ": layer '" + layer.name() + "' has " +
                    std::to_string(found->second.size()) + " weights there, the model's has " +
                    std::to_string(weights.size()));
    }
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (found->second[i].shape() != weights[i].shape()) {
        throw IoError(path + ": weight " + std::to_string(i) + " of layer '" + layer.name() +
                      "' is " + shape_str(found->second[i].shape()) + " there, " +
                      shape_str(weights[i].shape()) + " in the model");
      }
      detail::require_finite(found->second[i], path + ": weight " + std::to_string(i) +
                                                   " of layer '" + layer.name() + "'");
      copies.emplace_back(weights[i], found->second[i]);
    }
  }
  for (const auto& [weight, value] : copies) {
    tandem::detail::copy_into(weight, cast(value, weight.dtype()).to(weight.device()),
                              "load_keras_weights: " + weight.name());
  }
}

}  // namespace tandem::io
