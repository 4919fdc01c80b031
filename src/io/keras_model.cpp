// Keras model descriptions (io::load_keras_model): the JSON of model.to_json() and the
// config.json inside a .keras file, as TensorFlow 2.15 (Keras 2.15) writes them. Each Keras layer
// becomes the Tandem layer of the same name and meaning, every argument read: an argument Tandem
// has is taken, one it lacks is accepted only at Keras' default, and anything else (an unknown
// layer class, a regularizer, channels_first) is an error naming the file, the layer and the
// argument. The .keras file is a zip archive (io/zip.h); its config.json is read here, its
// weights by load_keras_weights (io/keras_file.cpp).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/files.h"
#include "io/weight_match.h"
#include "io/zip.h"
#include "tandem/io.h"

namespace tandem::io {
namespace {

using nlohmann::json;

// A Keras model's description is kilobytes (megabytes for the largest applications): a
// config.json declared larger is a damaged file or a decompression bomb.
constexpr std::uint64_t kMaxConfigBytes = std::uint64_t{64} << 20;

json read_model_json(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_whole_file(path);
  const std::string text = detail::is_zip(bytes)
                               ? detail::zip_member(bytes, "config.json", path, kMaxConfigBytes)
                               : std::string(bytes.begin(), bytes.end());
  // Keras 2's legacy format: an HDF5 file, which holds the model but is no model description.
  constexpr std::string_view kHdf5Signature("\x89HDF\r\n\x1a\n", 8);
  if (text.starts_with(kHdf5Signature)) {
    throw IoError(path +
                  ": an HDF5 file (Keras' legacy .h5 model format), not a model description; "
                  "save it as a .keras file in TensorFlow 2.15 and pass that: "
                  "tf.keras.models.load_model('" +
                  path + "').save('model.keras')");
  }
  try {
    return json::parse(text);
  } catch (const json::exception& error) {  // malformed, or a number out of range (1e400)
    throw IoError(path + ": not JSON (" + error.what() +
                  "); pass what model.to_json() wrote, the config.json of a .keras file, or the "
                  ".keras file");
  }
}

// ---- One layer's config, every key accounted for ----

class LayerArguments {
 public:
  LayerArguments(const json& config, std::string where)
      : config_(config), where_(std::move(where)) {
    if (!config_.is_object()) throw error("its config is not an object");
  }

  InvalidArgument error(const std::string& what) const {
    return InvalidArgument(where_ + ": " + what);
  }

  bool has(const std::string& key) const {
    return config_.contains(key) && !config_[key].is_null();
  }

  // The value of `key`, or `fallback` (Keras' default) when absent or null.
  template <typename T>
  T get(const std::string& key, T fallback) {
    seen_.insert(key);
    if (!has(key)) return fallback;
    try {
      return config_[key].get<T>();
    } catch (const json::exception&) {
      throw error("argument '" + key + "' is " + config_[key].dump() +
                  ", not of the type Keras gives it");
    }
  }

  const json& raw(const std::string& key) {
    seen_.insert(key);
    return config_.contains(key) ? config_[key] : null_;
  }

  // An argument Tandem does not have: fine at Keras' default, an error otherwise.
  void require(const std::string& key, const json& keras_default, const std::string& why = "") {
    seen_.insert(key);
    if (!config_.contains(key) || config_[key] == keras_default) return;
    throw error(
        "argument " + key + "=" + config_[key].dump() + " is not supported" +
        (why.empty() ? " (only " + keras_default.dump() + ", Keras' default)" : "; " + why));
  }
  void require_null(const std::string& key) { require(key, json(nullptr)); }

  // A pair as Keras writes kernel sizes and strides: [h, w], or one number for both.
  nn::Size2 size2(const std::string& key, nn::Size2 fallback) {
    const json& value = raw(key);
    if (value.is_null()) return fallback;
    if (value.is_number_integer()) return {value.get<std::int64_t>()};
    if (value.is_array() && value.size() == 2 && value[0].is_number_integer() &&
        value[1].is_number_integer()) {
      return {value[0].get<std::int64_t>(), value[1].get<std::int64_t>()};
    }
    throw error("argument '" + key + "' is " + value.dump() + ", not [height, width]");
  }

  // Keras' serialized initializer: {"class_name": "GlorotUniform", "config": {...}} or a name.
  std::string initializer(const std::string& key, const std::string& fallback) {
    const json& value = raw(key);
    if (value.is_null()) return fallback;
    if (value.is_string())
      return nn::initializer_name(nn::parse_initializer(value.get<std::string>()));
    const std::string class_name = value.value("class_name", "");
    static const std::map<std::string, std::string> names{{"GlorotUniform", "glorot_uniform"},
                                                          {"GlorotNormal", "glorot_normal"},
                                                          {"HeNormal", "he_normal"},
                                                          {"HeUniform", "he_uniform"},
                                                          {"Zeros", "zeros"},
                                                          {"Ones", "ones"}};
    if (const auto found = names.find(class_name); found != names.end()) return found->second;
    if (class_name == "RandomUniform") {
      const json& config = value.value("config", json::object());
      if (config.value("minval", -0.05) == -0.05 && config.value("maxval", 0.05) == 0.05) {
        return "uniform";
      }
    }
    throw error("argument " + key + "=" + value.dump() +
                " is not supported; Tandem initialises with GlorotUniform, GlorotNormal, "
                "HeNormal, HeUniform, Zeros, Ones or RandomUniform(-0.05, 0.05)");
  }
  void require_initializer(const std::string& key, const std::string& keras_default) {
    if (initializer(key, keras_default) != keras_default) {
      throw error("argument " + key + "=" + config_[key].dump() + " is not supported (only " +
                  keras_default + ", Keras' default)");
    }
  }

  std::string activation(const std::string& key = "activation") {
    const json& value = raw(key);
    if (value.is_null()) return "linear";
    if (!value.is_string()) {
      throw error("argument " + key + "=" + value.dump() + " is not an activation Tandem has");
    }
    try {
      return nn::activation_name(nn::parse_activation(value.get<std::string>()));
    } catch (const InvalidArgument& unknown) {
      throw error(unknown.what());
    }
  }

  // The single feature axis of a normalisation: the last, as Tandem normalises.
  void require_last_axis(const std::string& key) {
    const json& value = raw(key);
    const json axis = value.is_array() && value.size() == 1 ? value[0] : value;
    if (value.is_null() || axis == -1 || axis == 3 || axis == 1 || axis == 2) return;
    throw error("argument " + key + "=" + value.dump() +
                " is not supported; Tandem normalises over the last axis");
  }

  // Every key was read: an argument Tandem does not know is an error, not silently dropped.
  void finish() const {
    static const std::set<std::string> everywhere{
        "name",       "trainable", "dtype",      "batch_input_shape",
        "batch_size", "input_dim", "input_shape"};
    for (const auto& [key, value] : config_.items()) {
      if (!seen_.contains(key) && !everywhere.contains(key)) {
        throw error("unknown argument '" + key + "'=" + value.dump() +
                    " (this Keras version's, or a custom layer's); remove it");
      }
    }
  }

 private:
  const json& config_;
  std::string where_;
  std::set<std::string> seen_;
  json null_ = nullptr;
};

struct MadeLayer {
  nn::Layer layer;
  bool softmax = false;  // its output is a softmax
};

void require_channels_last(LayerArguments& arguments) {
  arguments.require("data_format", "channels_last", "Tandem's images are NHWC (channels_last)");
}

MadeLayer make_keras_layer(const std::string& class_name, const std::string& name,
                           LayerArguments& arguments) {
  const auto regularizers_and_constraints = [&](std::initializer_list<const char*> weights) {
    arguments.require_null("activity_regularizer");
    for (const char* weight : weights) {
      arguments.require_null(std::string(weight) + "_regularizer");
      arguments.require_null(std::string(weight) + "_constraint");
    }
  };
  if (class_name == "Dense") {
    const auto units = arguments.get<std::int64_t>("units", 0);
    if (units <= 0) throw arguments.error("units must be positive");
    const std::string activation = arguments.activation();
    const bool use_bias = arguments.get<bool>("use_bias", true);
    const std::string kernel = arguments.initializer("kernel_initializer", "glorot_uniform");
    arguments.require_initializer("bias_initializer", "zeros");
    regularizers_and_constraints({"kernel", "bias"});
    return {nn::Dense(units, activation, use_bias, kernel, name), activation == "softmax"};
  }
  if (class_name == "Conv2D") {
    nn::Conv2DConfig config;
    const auto filters = arguments.get<std::int64_t>("filters", 0);
    if (filters <= 0) throw arguments.error("filters must be positive");
    const nn::Size2 kernel_size = arguments.size2("kernel_size", 0);
    config.strides = arguments.size2("strides", 1);
    config.padding = arguments.get<std::string>("padding", "valid");
    config.dilation_rate = arguments.size2("dilation_rate", 1);
    config.activation = arguments.activation();
    config.use_bias = arguments.get<bool>("use_bias", true);
    config.kernel_initializer = arguments.initializer("kernel_initializer", "glorot_uniform");
    config.name = name;
    arguments.require_initializer("bias_initializer", "zeros");
    arguments.require("groups", 1, "Tandem's Conv2D has no grouped convolution");
    require_channels_last(arguments);
    regularizers_and_constraints({"kernel", "bias"});
    return {nn::Conv2D(filters, kernel_size, config), config.activation == "softmax"};
  }
  if (class_name == "MaxPooling2D" || class_name == "AveragePooling2D") {
    const nn::Size2 pool_size = arguments.size2("pool_size", 2);
    const std::optional<nn::Size2> strides =
        arguments.has("strides") ? std::optional(arguments.size2("strides", 2)) : std::nullopt;
    arguments.raw("strides");
    const std::string padding = arguments.get<std::string>("padding", "valid");
    require_channels_last(arguments);
    if (class_name == "MaxPooling2D") return {nn::MaxPool2D(pool_size, strides, padding, name)};
    return {nn::AveragePooling2D(pool_size, strides, padding, name)};
  }
  if (class_name == "GlobalAveragePooling2D" || class_name == "GlobalAveragePooling1D") {
    require_channels_last(arguments);
    arguments.require("keepdims", false);
    if (class_name == "GlobalAveragePooling2D") return {nn::GlobalAveragePooling2D(name)};
    return {nn::GlobalAveragePooling1D(name)};
  }
  if (class_name == "Flatten") {
    require_channels_last(arguments);
    return {nn::Flatten(name)};
  }
  if (class_name == "Dropout") {
    const double rate = arguments.get<double>("rate", -1.0);
    if (!(rate >= 0.0 && rate < 1.0)) throw arguments.error("rate must be in [0, 1)");
    arguments.require_null("noise_shape");
    const std::optional<std::uint64_t> seed =
        arguments.has("seed") ? std::optional(arguments.get<std::uint64_t>("seed", 0))
                              : std::nullopt;
    arguments.raw("seed");
    return {nn::Dropout(rate, seed, name)};
  }
  if (class_name == "BatchNormalization") {
    arguments.require_last_axis("axis");
    const double momentum = arguments.get<double>("momentum", 0.99);
    const double epsilon = arguments.get<double>("epsilon", 1e-3);
    arguments.require("center", true);
    arguments.require("scale", true);
    arguments.require("synchronized", false);
    arguments.require_initializer("beta_initializer", "zeros");
    arguments.require_initializer("gamma_initializer", "ones");
    arguments.require_initializer("moving_mean_initializer", "zeros");
    arguments.require_initializer("moving_variance_initializer", "ones");
    regularizers_and_constraints({"beta", "gamma"});
    return {nn::BatchNormalization(momentum, epsilon, name)};
  }
  if (class_name == "LayerNormalization") {
    arguments.require_last_axis("axis");
    const double epsilon = arguments.get<double>("epsilon", 1e-3);
    arguments.require("center", true);
    arguments.require("scale", true);
    arguments.require_initializer("beta_initializer", "zeros");
    arguments.require_initializer("gamma_initializer", "ones");
    regularizers_and_constraints({"beta", "gamma"});
    return {nn::LayerNormalization(epsilon, name)};
  }
  if (class_name == "Activation") {
    const std::string activation = arguments.activation();
    return {nn::Activation(activation, name), activation == "softmax"};
  }
  if (class_name == "ReLU") {
    arguments.require("negative_slope", 0.0);
    arguments.require("threshold", 0.0);
    const json& max_value = arguments.raw("max_value");
    if (max_value.is_null()) return {nn::Activation("relu", name)};
    // MobileNetV2's ReLU(6.0).
    if (max_value.is_number() && max_value.get<double>() == 6.0) {
      return {nn::Activation("relu6", name)};
    }
    throw arguments.error("argument max_value=" + max_value.dump() +
                          " is not supported; Tandem's ReLU caps at 6 (relu6) or not at all");
  }
  if (class_name == "Softmax") {
    arguments.require_last_axis("axis");
    return {nn::Activation("softmax", name), true};
  }
  if (class_name == "Add") return {nn::Add(name)};
  if (class_name == "Embedding") {
    const auto input_dim = arguments.get<std::int64_t>("input_dim", 0);
    const auto output_dim = arguments.get<std::int64_t>("output_dim", 0);
    if (input_dim <= 0 || output_dim <= 0) {
      throw arguments.error("input_dim and output_dim must be positive");
    }
    const std::string initializer = arguments.initializer("embeddings_initializer", "uniform");
    arguments.require("mask_zero", false, "Tandem's Embedding has no masking");
    arguments.raw("input_length");
    arguments.require_null("embeddings_regularizer");
    arguments.require_null("embeddings_constraint");
    arguments.require_null("activity_regularizer");
    arguments.require("sparse", false);
    return {nn::Embedding(input_dim, output_dim, initializer, name)};
  }
  throw arguments.error(
      "layer class '" + class_name +
      "' is not one Tandem has; it reads Dense, Conv2D, MaxPooling2D, AveragePooling2D, "
      "GlobalAveragePooling2D/1D, Flatten, Dropout, BatchNormalization, LayerNormalization, "
      "Activation, ReLU, Softmax, Add, Embedding and InputLayer");
}

// A layer's own dtype policy, where Keras gave it one other than float32.
nn::Layer with_policy(nn::Layer layer, const json& dtype) {
  if (dtype.is_object() && dtype.value("class_name", "") == "Policy") {
    const std::string policy = dtype.at("config").value("name", "float32");
    if (policy != "float32") return layer.with_dtype_policy(policy);
  }
  return layer;
}

struct InputSpec {
  Shape shape;  // without the batch axis
  DType dtype = DType::f32;
  std::string name;
};

std::optional<Shape> shape_without_batch(const json& batch_shape, const std::string& where) {
  if (!batch_shape.is_array() || batch_shape.empty()) return std::nullopt;
  Shape shape;
  for (std::size_t axis = 1; axis < batch_shape.size(); ++axis) {
    if (!batch_shape[axis].is_number_integer()) {
      throw InvalidArgument(where + ": the input shape " + batch_shape.dump() +
                            " has a free axis; Tandem needs a fixed shape (give keras.Input "
                            "every extent but the batch's)");
    }
    shape.push_back(batch_shape[axis].get<std::int64_t>());
  }
  return shape;
}

DType keras_dtype(const json& dtype, const std::string& where) {
  if (dtype.is_null() || dtype == "float32") return DType::f32;
  if (dtype == "int32") return DType::i32;
  if (dtype == "int64") return DType::i64;
  throw InvalidArgument(where + ": input dtype " + dtype.dump() +
                        " is not supported (float32, int32 or int64)");
}

struct LayerEntry {
  std::string class_name;
  std::string name;
  const json* config;
  const json* entry;
};

LayerEntry layer_entry(const json& entry, const std::string& path) {
  if (!entry.is_object() || !entry.contains("class_name") || !entry.contains("config")) {
    throw InvalidArgument(
        path + ": a layer entry without class_name and config: " + entry.dump().substr(0, 200));
  }
  const json& config = entry.at("config");
  const std::string name = entry.contains("name") ? entry.at("name").get<std::string>()
                                                  : config.value("name", std::string());
  return {entry.at("class_name").get<std::string>(), name, &config, &entry};
}

std::string where_of(const std::string& path, const LayerEntry& layer) {
  return path + ": layer '" + layer.name + "' (" + layer.class_name + ")";
}

MadeLayer convert(const std::string& class_name, const std::string& name, const json& config,
                  const std::string& where) {
  LayerArguments arguments(config, where);
  if (class_name == "Sequential" || class_name == "Functional" || class_name == "Model") {
    throw arguments.error("a model inside the model is not supported; flatten it into one");
  }
  MadeLayer made;
  try {
    made = make_keras_layer(class_name, name, arguments);
  } catch (const InvalidArgument& error) {
    const std::string text = error.what();
    throw InvalidArgument(text.starts_with(where) ? text : where + ": " + text);
  }
  arguments.finish();
  made.layer = with_policy(made.layer, config.value("dtype", json()));
  if (!config.value("trainable", true)) made.layer.set_trainable(false);
  return made;
}

MadeLayer convert(const LayerEntry& entry, const std::string& path) {
  return convert(entry.class_name, entry.name, *entry.config, where_of(path, entry));
}

KerasModel sequential(const json& config, const std::string& path,
                      const std::optional<Shape>& fallback_shape) {
  std::vector<nn::Layer> layers;
  std::optional<InputSpec> input;
  bool softmax = false;
  const auto input_from = [&](const json& layer_config, const std::string& where) {
    if (const auto shape =
            shape_without_batch(layer_config.value("batch_input_shape", json()), where)) {
      input = InputSpec{*shape, keras_dtype(layer_config.value("dtype", json()), where), ""};
    }
  };
  if (!config.contains("layers") || !config.at("layers").is_array()) {
    throw InvalidArgument(path + ": the Sequential model has no list of layers");
  }
  for (const json& item : config.at("layers")) {
    const LayerEntry entry = layer_entry(item, path);
    if (entry.class_name == "InputLayer") {
      if (!layers.empty())
        throw InvalidArgument(where_of(path, entry) + ": an input after a layer");
      input_from(*entry.config, where_of(path, entry));
      continue;
    }
    if (layers.empty() && !input) input_from(*entry.config, where_of(path, entry));
    MadeLayer made = convert(entry, path);
    layers.push_back(made.layer);
    softmax = made.softmax;
  }
  if (!input) {
    if (const auto shape = shape_without_batch(config.value("build_input_shape", json()), path)) {
      input = InputSpec{*shape, DType::f32, ""};
    }
  }
  if (!input && fallback_shape) input = InputSpec{*fallback_shape, DType::f32, ""};
  if (!input) {
    throw InvalidArgument(path +
                          ": the model has no input shape; build it in Keras with keras.Input(...) "
                          "before model.to_json(), or give the data it trains on");
  }
  if (layers.empty()) throw InvalidArgument(path + ": the Sequential model has no layers");
  nn::Sequential model(layers, config.value("name", std::string("sequential")));
  model.build(input->shape, input->dtype);
  return {std::move(model), softmax, "Sequential"};
}

// [["name", node_index, tensor_index], ...] (or one such triple)
std::vector<json> tensor_references(const json& value) {
  if (value.is_array() && !value.empty() && value[0].is_string()) return {value};
  return value.is_array() ? std::vector<json>(value.begin(), value.end()) : std::vector<json>{};
}

KerasModel functional(const json& config, const std::string& path) {
  std::map<std::string, LayerEntry> entries;
  std::map<std::string, MadeLayer> made;
  // The output of (layer, node index): a layer called twice (shared) has two nodes.
  std::map<std::pair<std::string, std::int64_t>, nn::SymbolicTensor> outputs;
  std::vector<std::string> order;
  for (const json& item : config.at("layers")) {
    LayerEntry entry = layer_entry(item, path);
    if (!entries.emplace(entry.name, entry).second) {
      throw InvalidArgument(path + ": two layers are named '" + entry.name + "'");
    }
    order.push_back(entry.name);
  }
  const std::vector<json> inputs = tensor_references(config.value("input_layers", json()));
  const std::vector<json> output_refs = tensor_references(config.value("output_layers", json()));
  if (inputs.size() != 1 || output_refs.size() != 1) {
    throw InvalidArgument(path + ": the model has " + std::to_string(inputs.size()) +
                          " inputs and " + std::to_string(output_refs.size()) +
                          " outputs; Tandem trains models of one input and one output");
  }
  std::optional<nn::SymbolicTensor> model_input;
  for (const std::string& name : order) {
    const LayerEntry& entry = entries.at(name);
    if (entry.class_name != "InputLayer") {
      made.emplace(name, convert(entry, path));
      continue;
    }
    const std::string where = where_of(path, entry);
    const auto shape = shape_without_batch(entry.config->value("batch_input_shape", json()), where);
    if (!shape) throw InvalidArgument(where + ": an input without batch_input_shape");
    const nn::SymbolicTensor input =
        nn::Input(*shape, keras_dtype(entry.config->value("dtype", json()), where), name);
    outputs.emplace(std::pair{name, std::int64_t{0}}, input);
    if (name == inputs[0].at(0).get<std::string>()) model_input = input;
  }
  if (!model_input) throw InvalidArgument(path + ": the model's input layer is not listed");
  // Each node once its inputs exist; Keras lists layers in an order that allows it, but a pass
  // over the rest until nothing changes needs no such promise.
  struct Pending {
    std::string layer;
    std::int64_t node;
    json references;
  };
  std::vector<Pending> pending;
  for (const std::string& name : order) {
    const LayerEntry& entry = entries.at(name);
    if (entry.class_name == "InputLayer") continue;
    const json& nodes = entry.entry->value("inbound_nodes", json::array());
    for (std::size_t node = 0; node < nodes.size(); ++node)
      pending.push_back({name, static_cast<std::int64_t>(node), nodes[node]});
  }
  while (!pending.empty()) {
    const std::size_t before = pending.size();
    for (auto it = pending.begin(); it != pending.end();) {
      std::vector<nn::SymbolicTensor> arguments;
      bool ready = true;
      for (const json& reference : tensor_references(it->references)) {
        if (reference.size() < 3 || !reference[0].is_string()) {
          throw InvalidArgument(path + ": layer '" + it->layer + "' has an inbound node " +
                                reference.dump() + " not in Keras 2's [layer, node, tensor] form");
        }
        if (reference.size() > 3 && !reference[3].empty()) {
          throw InvalidArgument(path + ": layer '" + it->layer + "' is called with arguments " +
                                reference[3].dump() + "; Tandem calls layers on tensors alone");
        }
        const auto found =
            outputs.find({reference[0].get<std::string>(), reference[1].get<std::int64_t>()});
        if (found == outputs.end()) {
          ready = false;
          break;
        }
        arguments.push_back(found->second);
      }
      if (!ready) {
        ++it;
        continue;
      }
      nn::Layer& layer = made.at(it->layer).layer;
      if (arguments.empty())
        throw InvalidArgument(path + ": layer '" + it->layer + "' has no inputs");
      outputs.emplace(std::pair{it->layer, it->node},
                      arguments.size() == 1 ? layer(arguments[0]) : layer(arguments));
      it = pending.erase(it);
    }
    if (pending.size() == before) {
      throw InvalidArgument(path + ": layer '" + pending.front().layer +
                            "' reads a layer that is not in the model (or the graph has a cycle)");
    }
  }
  const std::string output_layer = output_refs[0].at(0).get<std::string>();
  const auto output = outputs.find({output_layer, output_refs[0].at(1).get<std::int64_t>()});
  if (output == outputs.end()) {
    throw InvalidArgument(path + ": the output layer '" + output_layer + "' is never called");
  }
  const bool softmax = made.contains(output_layer) && made.at(output_layer).softmax;
  return {nn::Model(*model_input, output->second, config.value("name", std::string("model"))),
          softmax, "Functional"};
}

}  // namespace

nn::Layer keras_layer(const std::string& class_name, const std::string& name,
                      const std::string& config_json, const std::string& where) {
  json config;
  try {
    config = json::parse(config_json);
  } catch (const json::exception& error) {
    throw InvalidArgument(where + ": the arguments are not JSON (" + error.what() + ")");
  }
  return convert(class_name, name, config, where).layer;
}

namespace {

// A parsed model description; `where` (a file, or "model_from_json") starts every message.
KerasModel keras_model(const json& model, const std::string& where,
                       const std::optional<Shape>& input_shape) {
  if (!model.is_object() || !model.contains("class_name") || !model.contains("config")) {
    throw InvalidArgument(where +
                          ": not a Keras model description (no class_name and config at the top); "
                          "pass what model.to_json() wrote or a .keras file");
  }
  const std::string class_name = model.at("class_name").get<std::string>();
  const json& config = model.at("config");
  try {
    if (class_name == "Sequential" || class_name == "Functional" || class_name == "Model") {
      KerasModel made = class_name == "Sequential" ? sequential(config, where, input_shape)
                                                   : functional(config, where);
      detail::require_unique_layer_names(made.model, where);
      return made;
    }
  } catch (const json::exception& error) {
    throw InvalidArgument(where + ": a member is missing or mistyped (" + error.what() + ")");
  } catch (const OutOfMemory& error) {
    throw OutOfMemory(where + ": " + error.what(), error.device(), error.requested_bytes(),
                      error.held_bytes(), error.available_bytes());
  }
  throw InvalidArgument(where + ": model class '" + class_name +
                        "' is not supported; Tandem reads Sequential and Functional models");
}

}  // namespace

KerasModel load_keras_model(const std::string& path, const std::optional<Shape>& input_shape) {
  return keras_model(read_model_json(path), path, input_shape);
}

KerasModel keras_model_from_json(const std::string& text) {
  constexpr const char* kWhere = "model_from_json";
  if (text.size() > kMaxConfigBytes) {
    throw InvalidArgument(std::string(kWhere) + ": the description is " +
                          std::to_string(text.size()) + " bytes, more than a model's " +
                          std::to_string(kMaxConfigBytes) + "; pass what model.to_json() wrote");
  }
  json model;
  try {
    model = json::parse(text);
  } catch (const json::exception& error) {
    throw InvalidArgument(std::string(kWhere) + ": not JSON (" + error.what() +
                          "); pass what model.to_json() wrote");
  }
  return keras_model(model, kWhere, std::nullopt);
}

}  // namespace tandem::io
