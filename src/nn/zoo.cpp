// The model zoo: ready-made models by name for the CLI, benchmarks and tests.
#include "tandem/nn.h"

namespace tandem::nn::zoo {
namespace {

Model cnn(const Shape& input_shape, std::int64_t num_classes) {
  Sequential model({Conv2D(32, 3, "relu"), MaxPool2D(), Conv2D(64, 3, "relu"), MaxPool2D(),
                    Flatten(), Dense(64, "relu"), Dense(num_classes)},
                   "cnn");
  model.build(input_shape);
  return Model(std::move(model));
}

Model mlp(const Shape& input_shape, std::int64_t num_classes) {
  Sequential model({Flatten(), Dense(128, "relu"), Dense(num_classes)}, "mlp");
  model.build(input_shape);
  return Model(std::move(model));
}

// A bias-free convolution: the BatchNormalization after it supplies the offset.
Conv2D conv_for_batch_norm(std::int64_t filters, Size2 kernel_size, std::int64_t stride) {
  Conv2DConfig config;
  config.strides = stride;
  config.padding = "same";
  config.use_bias = false;
  return Conv2D(filters, kernel_size, config);
}

// Two 3x3 Conv2D -> BatchNormalization stages with a ReLU between, added to the shortcut and
// passed through a ReLU. When the block changes the resolution or the channel count, the
// shortcut is projected with a strided 1x1 convolution (He et al., option B).
SymbolicTensor residual_block(const SymbolicTensor& x, std::int64_t filters, std::int64_t stride) {
  SymbolicTensor y = conv_for_batch_norm(filters, 3, stride)(x);
  y = Activation("relu")(BatchNormalization()(y));
  y = BatchNormalization()(conv_for_batch_norm(filters, 3, 1)(y));
  SymbolicTensor shortcut = x;
  if (stride != 1 || x.shape().back() != filters) {
    shortcut = BatchNormalization()(conv_for_batch_norm(filters, 1, stride)(x));
  }
  return Activation("relu")(Add()({y, shortcut}));
}

Model resnet_small(const Shape& input_shape, std::int64_t num_classes) {
  const SymbolicTensor inputs = Input(input_shape);
  SymbolicTensor x = conv_for_batch_norm(16, 3, 1)(inputs);
  x = Activation("relu")(BatchNormalization()(x));
  x = residual_block(x, 16, 1);
  x = residual_block(x, 32, 2);
  x = residual_block(x, 64, 2);
  x = GlobalAveragePooling2D()(x);
  const SymbolicTensor outputs = Dense(num_classes)(x);
  return Model(inputs, outputs, "resnet_small");
}

using Builder = Model (*)(const Shape&, std::int64_t);
constexpr std::pair<const char*, Builder> kModels[] = {
    {"cnn", cnn},
    {"mlp", mlp},
    {"resnet_small", resnet_small},
};

}  // namespace

std::vector<std::string> names() {
  std::vector<std::string> all;
  for (const auto& [name, builder] : kModels)
    all.emplace_back(name);
  return all;
}

Model build(const std::string& name, const Shape& input_shape, std::int64_t num_classes) {
  if (num_classes <= 0) {
    throw InvalidArgument("zoo::build: num_classes must be positive, got " +
                          std::to_string(num_classes));
  }
  for (const auto& [known, builder] : kModels) {
    if (name == known) return builder(input_shape, num_classes);
  }
  std::string known_names;
  for (const std::string& known : names())
    known_names += (known_names.empty() ? "" : ", ") + known;
  throw InvalidArgument("zoo::build: unknown model '" + name + "'; choose one of: " + known_names);
}

}  // namespace tandem::nn::zoo
