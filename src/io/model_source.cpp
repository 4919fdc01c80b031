// The model a training run names: a zoo model, a Keras description or file, or a saved model.
#include <algorithm>
#include <filesystem>
#include <variant>

#include "core/text.h"
#include "tandem/io.h"

namespace tandem::io {
namespace {

// Whether the model's last layer gives probabilities (its activation is a softmax).
bool ends_in_softmax(const nn::Model& model) {
  const std::optional<nn::LayerConfig> config = model.layers().back().impl().config();
  if (!config) return false;
  const auto activation = config->find("activation");
  return activation != config->end() && std::holds_alternative<std::string>(activation->second) &&
         std::get<std::string>(activation->second) == "softmax";
}

}  // namespace

ModelSource load_model_source(const std::string& source, const Shape& image_shape,
                              std::int64_t num_classes, const SettingName& name) {
  const std::vector<std::string> zoo = nn::zoo::image_model_names();
  if (std::find(zoo.begin(), zoo.end(), source) != zoo.end()) {
    return {nn::zoo::build(source, image_shape, num_classes), false, source};
  }
  ModelSource made = [&]() -> ModelSource {
    if (std::filesystem::is_directory(source)) {
      nn::Model saved = load_model(source);
      const std::string model_name = saved.name();
      const bool softmax = ends_in_softmax(saved);
      return {std::move(saved), softmax,
              "saved model '" + model_name + "' from " + source + " (with its weights)"};
    }
    KerasModel keras = load_keras_model(source, image_shape);
    const std::string model_name = keras.model.name();
    // A .keras file carries its weights: training goes on from them.
    const bool with_weights = source.ends_with(".keras");
    if (with_weights) load_keras_weights(keras.model, source);
    return {std::move(keras.model), keras.outputs_probabilities,
            "Keras " + keras.class_name + " '" + model_name + "' from " + source +
                (with_weights ? " (with its weights)" : "")};
  }();
  const Shape& input = made.model.input_shape();    // (-1, H, W, C)
  const Shape& output = made.model.output_shape();  // (-1, classes)
  const Shape expected_input = [&] {
    Shape shape{-1};
    shape.insert(shape.end(), image_shape.begin(), image_shape.end());
    return shape;
  }();
  if (input != expected_input) {
    throw ConfigError(name("model") + " " + source + " takes inputs " + shape_str(input) +
                      ", the data's images are " + shape_str(expected_input) + "; pass " +
                      name("image-size") + "/" + name("channels") +
                      " to match, or change the model's input");
  }
  if (output != Shape{-1, num_classes}) {
    throw ConfigError(name("model") + " " + source + " gives outputs " + shape_str(output) +
                      ", the data has " + std::to_string(num_classes) +
                      " classes; its last layer needs one unit per class");
  }
  return made;
}

void check_model_source(const std::string& name, const std::string& text) {
  const std::vector<std::string> zoo = nn::zoo::image_model_names();
  if (std::find(zoo.begin(), zoo.end(), text) == zoo.end() && !std::filesystem::exists(text)) {
    throw ConfigError("unknown model '" + text + "' for " + name + "; choose " + join(zoo, ", ") +
                      ", or pass a Keras model file (.json, .keras) or a saved model folder "
                      "that exists");
  }
}

}  // namespace tandem::io
