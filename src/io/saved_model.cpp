// Saved models: <dir>/model.json (the architecture: the input, each layer's class, name and
// config, for functional models the graph's nodes and for a quantised model its calibrated
// inputs; sealed with a checksum, and holding the weights file's size and checksum) and
// <dir>/model.safetensors (the weights by name). The folder
// is staged beside the target and swapped in whole, so a crash leaves the old model or the new.
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "core/files.h"
#include "core/tensor_copy.h"
#include "io/file_io.h"
#include "io/format_util.h"
#include "io/layer_config.h"
#include "io/weight_match.h"
#include "nn/model_state.h"
#include "tandem/io.h"
#include "tandem/runtime.h"

namespace tandem::io {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "tandem.model";
constexpr int kFormatVersion = 1;
constexpr const char* kArchitectureFile = "model.json";
constexpr const char* kWeightsFile = "model.safetensors";

nn::LayerConfig config_from_json(const json& object, const std::string& where) {
  nn::LayerConfig config;
  for (const auto& [key, value] : object.items()) {
    if (value.is_boolean()) {
      config[key] = value.get<bool>();
    } else if (value.is_number_unsigned()) {
      config[key] = value.get<std::uint64_t>();
    } else if (value.is_number_integer()) {
      config[key] = value.get<std::int64_t>();
    } else if (value.is_number_float()) {
      config[key] = value.get<double>();
    } else if (value.is_string()) {
      config[key] = value.get<std::string>();
    } else if (value.is_array() && std::all_of(value.begin(), value.end(), [](const json& item) {
                 return item.is_number_integer();
               })) {
      config[key] = value.get<std::vector<std::int64_t>>();
    } else {
      throw IoError(where + ": config argument '" + key + "' has the unsupported value " +
                    value.dump());
    }
  }
  return config;
}

json layer_json(const nn::Layer& layer) {
  const std::optional<nn::LayerConfig> config = layer.impl().config();
  if (!config) {
    throw InvalidArgument(std::string("Model::save: layer '") + layer.name() + "' (" +
                          layer.impl().class_name() +
                          ") cannot be saved: it has no config; override LayerBase::config() "
                          "and add the class to nn::register_layer so load_model can make it");
  }
  // The layer's own dtype policy (null: none, it follows its input's dtype), so a model trained
  // under mixed precision loads with its float32 layers whatever the global policy is then.
  const std::optional<mixed_precision::Policy>& policy = layer.impl().dtype_policy();
  return {{"class_name", layer.impl().class_name()},
          {"name", layer.name()},
          {"trainable", layer.trainable()},
          {"dtype_policy", policy ? json(policy->name()) : json(nullptr)},
          {"config", detail::config_json(*config)}};
}

// model.json, checked: its seal, its format and version.
json read_architecture(const std::string& directory) {
  const std::string path = (fs::path(directory) / kArchitectureFile).string();
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    throw IoError(directory + " is not a folder; give the folder Model::save wrote");
  }
  if (!fs::exists(path, error)) {
    throw IoError(directory + " has no " + kArchitectureFile + "; it is not a saved Tandem model");
  }
  json architecture = detail::open_sealed_json(
      read_whole_file(path, {.max_bytes = detail::kMaxJsonFileBytes}), path);
  try {
    if (architecture.at("format") != kFormat) {
      throw IoError(path + ": not a Tandem model (format " + architecture.at("format").dump() +
                    ")");
    }
    if (architecture.at("format_version").get<int>() > kFormatVersion) {
      throw IoError(path + ": format version " + architecture.at("format_version").dump() +
                    " is newer than this Tandem reads; update Tandem");
    }
  } catch (const json::exception& failure) {
    throw IoError(path + ": a member is missing or mistyped (" + failure.what() + ")");
  }
  return architecture;
}

nn::Model build_model(const json& architecture, const std::string& where) {
  const json& input = architecture.at("input");
  const Shape input_shape = input.at("shape").get<Shape>();
  const DType dtype = parse_dtype(input.at("dtype").get<std::string>());
  std::vector<nn::Layer> layers;
  std::map<std::string, nn::Layer> by_name;
  for (const json& entry : architecture.at("layers")) {
    const std::string name = entry.at("name").get<std::string>();
    nn::Layer layer;
    try {
      layer = nn::make_layer(entry.at("class_name").get<std::string>(), name,
                             config_from_json(entry.at("config"), where));
    } catch (const InvalidArgument& error) {
      throw IoError(where + ": layer '" + name + "': " + error.what());
    }
    layer.set_trainable(entry.at("trainable").get<bool>());
    // Files written before the policy was saved leave the layer with the global one.
    if (const auto policy = entry.find("dtype_policy"); policy != entry.end()) {
      if (!policy->is_null() && !policy->is_string()) {
        throw IoError(where + ": layer '" + name +
                      "': dtype_policy is neither a policy name nor null; the file is damaged");
      }
      try {
        layer.impl().set_dtype_policy(
            policy->is_null() ? std::nullopt
                              : std::optional(mixed_precision::Policy(policy->get<std::string>())));
      } catch (const InvalidArgument& error) {
        throw IoError(where + ": layer '" + name + "': " + error.what());
      }
    }
    if (!by_name.emplace(name, layer).second) {
      throw IoError(where + ": two layers are named '" + name + "'; the file is damaged");
    }
    layers.push_back(layer);
  }
  const std::string name = architecture.at("name").get<std::string>();
  const std::string class_name = architecture.at("class_name").get<std::string>();
  if (class_name == "Sequential") {
    nn::Sequential sequential(layers, name);
    sequential.build(input_shape, dtype);
    return nn::Model(std::move(sequential));
  }
  if (class_name != "Functional") {
    throw IoError(where + ": unknown model class '" + class_name + "' (Sequential or Functional)");
  }
  std::vector<nn::SymbolicTensor> values{
      nn::Input(input_shape, dtype, input.at("name").get<std::string>())};
  for (const json& node : architecture.at("nodes")) {
    const std::string layer_name = node.at("layer").get<std::string>();
    const auto layer = by_name.find(layer_name);
    if (layer == by_name.end()) {
      throw IoError(where + ": a node uses the layer '" + layer_name + "', which is not listed");
    }
    std::vector<nn::SymbolicTensor> inputs;
    for (const json& index : node.at("inputs")) {
      const auto position = index.get<std::size_t>();
      if (position >= values.size()) {
        throw IoError(where + ": a node of layer '" + layer_name + "' reads node " +
                      std::to_string(position) + ", which does not come before it");
      }
      inputs.push_back(values[position]);
    }
    values.push_back(inputs.size() == 1 ? layer->second(inputs[0]) : layer->second(inputs));
  }
  if (values.size() < 2) throw IoError(where + ": the functional model has no nodes");
  return nn::Model(values.front(), values.back(), name);
}

}  // namespace

NamedTensors named_weights(const nn::Model& model) {
  NamedTensors weights;
  std::set<std::string> names;
  for (const Tensor& weight : model.weights()) {
    if (!names.insert(weight.name()).second) {
      throw InvalidArgument("model '" + model.name() + "' has two weights named '" + weight.name() +
                            "'; give its layers unique names");
    }
    weights.emplace_back(weight.name(), weight);
  }
  return weights;
}

SavedModelInfo read_saved_model_info(const std::string& directory) {
  const std::string architecture_path = (fs::path(directory) / kArchitectureFile).string();
  const json architecture = read_architecture(directory);
  try {
    SavedModelInfo info;
    info.name = architecture.at("name").get<std::string>();
    info.class_name = architecture.at("class_name").get<std::string>();
    info.input_shape = architecture.at("input").at("shape").get<Shape>();
    info.input_dtype = parse_dtype(architecture.at("input").at("dtype").get<std::string>());
    info.class_names = architecture.at("class_names").get<std::vector<std::string>>();
    info.tandem_version = architecture.at("tandem_version").get<std::string>();
    return info;
  } catch (const json::exception& failure) {
    throw IoError(architecture_path + ": a member is missing or mistyped (" + failure.what() +
                  "); the file was not written by this version of Tandem");
  }
}

nn::Model load_model(const std::string& directory) {
  const std::string architecture_path = (fs::path(directory) / kArchitectureFile).string();
  const std::string weights_path = (fs::path(directory) / kWeightsFile).string();
  const json architecture = read_architecture(directory);
  try {
    const detail::Bytes bytes =
        read_whole_file(weights_path, {.max_bytes = detail::kMaxWeightsFileBytes});
    detail::check_file_record(bytes, architecture.at("weights"), weights_path);
    const Safetensors stored = decode_safetensors(bytes, weights_path);
    nn::Model model = build_model(architecture, architecture_path);
    detail::require_unique_layer_names(model, architecture_path);
    const NamedTensors weights = named_weights(model);
    std::vector<std::string> problems;
    detail::match_weights(weights, stored, kWeightsFile, problems);
    if (!problems.empty()) {
      try {
        detail::throw_mismatches("the weights in " + weights_path, problems,
                                 "The two files of the saved model disagree");
      } catch (const InvalidArgument& mismatch) {
        throw IoError(mismatch.what());
      }
    }
    for (const auto& [name, weight] : weights) {
      detail::require_finite(*stored.find(name), weights_path + ": weight '" + name + "'");
      tandem::detail::copy_into(weight, *stored.find(name), "load_model: " + name);
    }
    if (const auto quantized = architecture.find("quantization"); quantized != architecture.end()) {
      std::vector<quantization::InputQuantization> inputs;
      for (const json& entry : *quantized) {
        quantization::InputQuantization input;
        input.layer = entry.at("layer").get<std::string>();
        input.is_unsigned = entry.at("input").get<std::string>() == "uint8";
        input.scale = detail::number_from_json(entry.at("scale"));
        input.threshold = detail::number_from_json(entry.at("threshold"));
        input.observed_max = detail::number_from_json(entry.at("observed_max"));
        inputs.push_back(std::move(input));
      }
      try {
        quantization::restore_quantization(model, inputs);
      } catch (const InvalidArgument& failure) {
        throw IoError(architecture_path + ": its quantisation does not fit the model (" +
                      failure.what() + ")");
      }
    }
    return model;
  } catch (const json::exception& failure) {
    throw IoError(architecture_path + ": a member is missing or mistyped (" + failure.what() +
                  "); the file was not written by this version of Tandem");
  }
}

}  // namespace tandem::io

namespace tandem::nn {

void Model::save(const std::string& directory, const std::vector<std::string>& class_names) const {
  const State& state = *state_;
  if (!state.built()) {
    throw InvalidArgument("Model::save: model '" + state.name +
                          "' is not built yet; build it or run it on data first");
  }
  if (!class_names.empty() &&
      static_cast<std::int64_t>(class_names.size()) != state.output.shape().back()) {
    throw InvalidArgument("Model::save: " + std::to_string(class_names.size()) +
                          " class names for the " + std::to_string(state.output.shape().back()) +
                          " outputs of model '" + state.name + "'; give one name per output");
  }
  const io::NamedTensors weights = io::named_weights(*this);
  nlohmann::json layers = nlohmann::json::array();
  for (const Layer& layer : this->layers())
    layers.push_back(io::layer_json(layer));
  // A quantised model's calibrated inputs (tandem/quantization.h), so it loads quantised.
  nlohmann::json quantized = nlohmann::json::array();
  for (const quantization::InputQuantization& input : quantization::quantized_inputs(*this)) {
    quantized.push_back({{"layer", input.layer},
                         {"input", input.is_unsigned ? "uint8" : "int8"},
                         {"scale", io::detail::number_json(input.scale)},
                         {"threshold", io::detail::number_json(input.threshold)},
                         {"observed_max", io::detail::number_json(input.observed_max)}});
  }
  const Node& input = *state.nodes.front();
  nlohmann::json architecture = {
      {"format", io::kFormat},
      {"format_version", io::kFormatVersion},
      {"tandem_version", version()},
      {"name", state.name},
      {"class_name", state.sequential ? "Sequential" : "Functional"},
      {"input",
       {{"name", input.name},
        {"shape", Shape(input.shape.begin() + 1, input.shape.end())},
        {"dtype", dtype_name(input.dtype)}}},
      {"layers", layers},
      {"class_names", class_names},
  };
  if (!state.sequential) {
    nlohmann::json nodes = nlohmann::json::array();
    for (std::size_t i = 1; i < state.nodes.size(); ++i) {
      nodes.push_back({{"layer", state.nodes[i]->layer.name()}, {"inputs", state.node_inputs[i]}});
    }
    architecture["nodes"] = nodes;
  }
  const std::vector<std::uint8_t> weight_bytes =
      io::encode_safetensors(weights, {{"format", "tandem"}, {"model", state.name}});
  if (!quantized.empty()) architecture["quantization"] = quantized;
  architecture["weights"] = io::detail::file_record(weight_bytes);

  io::detail::require_replaceable(directory, {io::kArchitectureFile, io::kWeightsFile},
                                  "Model::save", "saved Tandem model");
  const std::string architecture_text = io::detail::seal_json(std::move(architecture));
  try {
    io::detail::write_directory(directory,
                                {{io::kWeightsFile, weight_bytes},
                                 {io::kArchitectureFile, io::detail::as_bytes(architecture_text)}});
  } catch (const IoError& failure) {
    throw IoError(std::string("Model::save: ") + failure.what() + " (nothing was changed in " +
                  directory + ")");
  }
}

}  // namespace tandem::nn
