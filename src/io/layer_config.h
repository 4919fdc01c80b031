// Reading a built-in layer's config (nn::Layer::impl().config()) for the exporters, which
// translate each layer kind from its config and weights.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tandem/nn.h"

namespace tandem::io::detail {

// What a layer's config says, by key.
template <typename T>
T config_value(const nn::LayerConfig& config, const std::string& key) {
  return std::get<T>(config.at(key));
}

// A two-element argument such as strides or pool_size.
inline std::array<std::int64_t, 2> pair_of(const nn::LayerConfig& config, const std::string& key) {
  const auto values = config_value<std::vector<std::int64_t>>(config, key);
  return {values[0], values[1]};
}

inline nn::ActivationFunction activation_of(const nn::LayerConfig& config) {
  return nn::parse_activation(config_value<std::string>(config, "activation"));
}

// The config of a built-in layer; `exporter` ("export_onnx") names the caller in the error.
inline nn::LayerConfig builtin_config(const nn::Layer& layer, const std::string& exporter,
                                      const std::string& format) {
  std::optional<nn::LayerConfig> config = layer.impl().config();
  if (!config) {
    throw InvalidArgument(exporter + ": layer '" + layer.name() + "' (" +
                          layer.impl().class_name() + ") is a custom layer; " + format +
                          " export covers the built-in layers");
  }
  return std::move(*config);
}

// A layer's config as JSON, each value as its own JSON type (what Model::save writes and Keras'
// configs hold).
inline nlohmann::json config_json(const nn::LayerConfig& config) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [key, value] : config) {
    std::visit([&](const auto& item) { object[key] = item; }, value);
  }
  return object;
}

}  // namespace tandem::io::detail
