// Making layers from their class name and config (what saved models store): a table of
// factories, the built-in layers first, custom ones added by register_layer.
#include <mutex>
#include <set>

#include "tandem/nn.h"

namespace tandem::nn {
namespace {

// Reads a config's arguments by name and type; every argument must be read, so a misspelt or
// foreign one is reported rather than ignored.
class ConfigReader {
 public:
  ConfigReader(std::string class_name, const LayerConfig& config)
      : class_name_(std::move(class_name)), config_(config) {}

  std::int64_t integer(const std::string& key, std::optional<std::int64_t> fallback = {}) {
    const ConfigValue* value = find(key, fallback.has_value());
    if (value == nullptr) return *fallback;
    if (const auto* signed_value = std::get_if<std::int64_t>(value)) return *signed_value;
    if (const auto* unsigned_value = std::get_if<std::uint64_t>(value);
        unsigned_value != nullptr && *unsigned_value <= std::uint64_t{INT64_MAX}) {
      return static_cast<std::int64_t>(*unsigned_value);
    }
    throw mistyped(key, "an integer");
  }

  std::uint64_t unsigned_integer(const std::string& key) {
    const ConfigValue* value = find(key, false);
    if (const auto* unsigned_value = std::get_if<std::uint64_t>(value)) return *unsigned_value;
    if (const auto* signed_value = std::get_if<std::int64_t>(value);
        signed_value != nullptr && *signed_value >= 0) {
      return static_cast<std::uint64_t>(*signed_value);
    }
    throw mistyped(key, "a non-negative integer");
  }

  double number(const std::string& key, std::optional<double> fallback = {}) {
    const ConfigValue* value = find(key, fallback.has_value());
    if (value == nullptr) return *fallback;
    if (const auto* real = std::get_if<double>(value)) return *real;
    if (const auto* whole = std::get_if<std::int64_t>(value)) return static_cast<double>(*whole);
    if (const auto* whole = std::get_if<std::uint64_t>(value)) return static_cast<double>(*whole);
    throw mistyped(key, "a number");
  }

  bool boolean(const std::string& key, std::optional<bool> fallback = {}) {
    const ConfigValue* value = find(key, fallback.has_value());
    if (value == nullptr) return *fallback;
    if (const auto* flag = std::get_if<bool>(value)) return *flag;
    throw mistyped(key, "true or false");
  }

  std::string text(const std::string& key, std::optional<std::string> fallback = {}) {
    const ConfigValue* value = find(key, fallback.has_value());
    if (value == nullptr) return *fallback;
    if (const auto* string = std::get_if<std::string>(value)) return *string;
    throw mistyped(key, "a string");
  }

  // A (height, width) pair, or one integer for both, as Keras accepts.
  Size2 size2(const std::string& key, std::optional<Size2> fallback = {}) {
    const ConfigValue* value = find(key, fallback.has_value());
    if (value == nullptr) return *fallback;
    if (const auto* pair = std::get_if<std::vector<std::int64_t>>(value)) {
      if (pair->size() == 2) return Size2((*pair)[0], (*pair)[1]);
    }
    if (std::holds_alternative<std::int64_t>(*value) ||
        std::holds_alternative<std::uint64_t>(*value)) {
      return Size2(integer(key));
    }
    throw mistyped(key, "two integers [height, width]");
  }

  // Throws for the arguments nobody read.
  void finish() const {
    for (const auto& [key, value] : config_) {
      if (!read_.contains(key)) {
        std::string known;
        for (const std::string& name : read_)
          known += (known.empty() ? "" : ", ") + name;
        throw InvalidArgument(class_name_ + ": unknown argument '" + key + "' in the config" +
                              (known.empty() ? "; this layer takes none" : "; it takes " + known));
      }
    }
  }

 private:
  const ConfigValue* find(const std::string& key, bool optional) {
    read_.insert(key);
    const auto found = config_.find(key);
    if (found != config_.end()) return &found->second;
    if (optional) return nullptr;
    throw InvalidArgument(class_name_ + ": the config lacks the required argument '" + key + "'");
  }

  InvalidArgument mistyped(const std::string& key, const char* expected) const {
    return InvalidArgument(class_name_ + ": argument '" + key + "' must be " + expected);
  }

  std::string class_name_;
  const LayerConfig& config_;
  std::set<std::string> read_;
};

using BuiltinFactory = Layer (*)(ConfigReader& config, const std::string& name);

Layer make_dense(ConfigReader& config, const std::string& name) {
  const std::int64_t units = config.integer("units");
  const std::string activation = config.text("activation", "linear");
  const bool use_bias = config.boolean("use_bias", true);
  const std::string initializer = config.text("kernel_initializer", "glorot_uniform");
  return Dense(units, activation, use_bias, initializer, name);
}

Layer make_conv2d(ConfigReader& config, const std::string& name) {
  const std::int64_t filters = config.integer("filters");
  const Size2 kernel_size = config.size2("kernel_size");
  Conv2DConfig options;
  options.strides = config.size2("strides", Size2(1));
  options.padding = config.text("padding", "valid");
  options.dilation_rate = config.size2("dilation_rate", Size2(1));
  options.activation = config.text("activation", "linear");
  options.use_bias = config.boolean("use_bias", true);
  options.kernel_initializer = config.text("kernel_initializer", "glorot_uniform");
  options.name = name;
  return Conv2D(filters, kernel_size, options);
}

template <typename Pool>
Layer make_pool(ConfigReader& config, const std::string& name) {
  const Size2 pool_size = config.size2("pool_size", Size2(2));
  const Size2 strides = config.size2("strides", pool_size);
  return Pool(pool_size, strides, config.text("padding", "valid"), name);
}

Layer make_global_average_pooling(ConfigReader&, const std::string& name) {
  return GlobalAveragePooling2D(name);
}

Layer make_flatten(ConfigReader&, const std::string& name) {
  return Flatten(name);
}

Layer make_dropout(ConfigReader& config, const std::string& name) {
  const double rate = config.number("rate");
  return Dropout(rate, config.unsigned_integer("seed"), name);
}

Layer make_batch_normalization(ConfigReader& config, const std::string& name) {
  const double momentum = config.number("momentum", 0.99);
  return BatchNormalization(momentum, config.number("epsilon", 1e-3), name);
}

Layer make_activation(ConfigReader& config, const std::string& name) {
  return Activation(config.text("activation"), name);
}

Layer make_add(ConfigReader&, const std::string& name) {
  return Add(name);
}

Layer make_embedding(ConfigReader& config, const std::string& name) {
  const std::int64_t input_dim = config.integer("input_dim");
  const std::int64_t output_dim = config.integer("output_dim");
  return Embedding(input_dim, output_dim, config.text("embeddings_initializer", "uniform"), name);
}

Layer make_position_embedding(ConfigReader& config, const std::string& name) {
  const std::int64_t sequence_length = config.integer("sequence_length");
  return PositionEmbedding(sequence_length, config.text("initializer", "glorot_uniform"), name);
}

Layer make_layer_normalization(ConfigReader& config, const std::string& name) {
  return LayerNormalization(config.number("epsilon", 1e-3), name);
}

Layer make_multi_head_attention(ConfigReader& config, const std::string& name) {
  const std::int64_t num_heads = config.integer("num_heads");
  const std::int64_t key_dim = config.integer("key_dim");
  const double dropout = config.number("dropout", 0.0);
  return MultiHeadAttention(num_heads, key_dim, dropout, config.unsigned_integer("seed"), name);
}

Layer make_global_average_pooling_1d(ConfigReader&, const std::string& name) {
  return GlobalAveragePooling1D(name);
}

constexpr std::pair<const char*, BuiltinFactory> kBuiltins[] = {
    {"Embedding", make_embedding},
    {"PositionEmbedding", make_position_embedding},
    {"LayerNormalization", make_layer_normalization},
    {"MultiHeadAttention", make_multi_head_attention},
    {"GlobalAveragePooling1D", make_global_average_pooling_1d},
    {"Dense", make_dense},
    {"Conv2D", make_conv2d},
    {"MaxPooling2D", make_pool<MaxPool2D>},
    {"AveragePooling2D", make_pool<AveragePooling2D>},
    {"GlobalAveragePooling2D", make_global_average_pooling},
    {"Flatten", make_flatten},
    {"Dropout", make_dropout},
    {"BatchNormalization", make_batch_normalization},
    {"Activation", make_activation},
    {"Add", make_add},
};

struct CustomLayers {
  std::mutex mutex;
  std::map<std::string, LayerFactory> factories;
};

CustomLayers& custom_layers() {
  static CustomLayers registry;
  return registry;
}

}  // namespace

Layer make_layer(const std::string& class_name, const std::string& name,
                 const LayerConfig& config) {
  for (const auto& [known, factory] : kBuiltins) {
    if (class_name != known) continue;
    ConfigReader reader(class_name, config);
    Layer layer = factory(reader, name);
    reader.finish();
    return layer;
  }
  LayerFactory custom;
  std::string names;
  {
    CustomLayers& registry = custom_layers();
    std::lock_guard lock(registry.mutex);
    if (const auto found = registry.factories.find(class_name); found != registry.factories.end()) {
      custom = found->second;
    }
    for (const auto& [known, factory] : registry.factories)
      names += ", " + known;
  }
  if (custom) return custom(name, config);
  std::string builtin;
  for (const auto& [known, factory] : kBuiltins)
    builtin += (builtin.empty() ? "" : ", ") + std::string(known);
  throw InvalidArgument("unknown layer class '" + class_name + "'; the known ones are " + builtin +
                        names + " (add a custom layer with nn::register_layer)");
}

void register_layer(const std::string& class_name, LayerFactory factory) {
  if (class_name.empty() || !factory) {
    throw InvalidArgument("nn::register_layer: give a class name and a factory function");
  }
  for (const auto& [known, builtin] : kBuiltins) {
    if (class_name == known) {
      throw InvalidArgument("nn::register_layer: '" + class_name +
                            "' is a built-in layer; give the custom layer another class name");
    }
  }
  CustomLayers& registry = custom_layers();
  std::lock_guard lock(registry.mutex);
  registry.factories[class_name] = std::move(factory);
}

}  // namespace tandem::nn
