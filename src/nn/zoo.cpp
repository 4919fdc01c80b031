// The model zoo: ready-made models by name for the CLI, benchmarks and tests.
#include <iterator>
#include <optional>

#include "tandem/nn.h"

namespace tandem::nn::zoo {
namespace {

// The logits layer: float32 under a mixed-precision policy, as Keras advises, so the softmax and
// the loss see full-precision logits.
Layer logits(std::int64_t num_classes) {
  Dense layer(num_classes);
  const std::optional<mixed_precision::Policy> policy = mixed_precision::global_policy();
  if (policy && policy->compute_dtype() != DType::f32) return layer.with_dtype_policy("float32");
  return layer;
}

Model cnn(const Shape& input_shape, std::int64_t num_classes) {
  Sequential model({Conv2D(32, 3, "relu"), MaxPool2D(), Conv2D(64, 3, "relu"), MaxPool2D(),
                    Flatten(), Dense(64, "relu"), logits(num_classes)},
                   "cnn");
  model.build(input_shape);
  return Model(std::move(model));
}

Model mlp(const Shape& input_shape, std::int64_t num_classes) {
  Sequential model({Flatten(), Dense(128, "relu"), logits(num_classes)}, "mlp");
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
  const SymbolicTensor outputs = logits(num_classes)(x);
  return Model(inputs, outputs, "resnet_small");
}

// ResNet-50's batch normalisation: TensorFlow's official model's momentum and epsilon.
SymbolicTensor batch_norm(const SymbolicTensor& x) {
  return BatchNormalization(0.9, 1e-5)(x);
}

// The v1.5 bottleneck: 1x1 reduce, 3x3 (carrying the stride), 1x1 expand to 4 x filters, each
// followed by batch normalisation; the shortcut projected (1x1, strided) when the shape changes.
SymbolicTensor bottleneck(const SymbolicTensor& x, std::int64_t filters, std::int64_t stride) {
  SymbolicTensor y = Activation("relu")(batch_norm(conv_for_batch_norm(filters, 1, 1)(x)));
  y = Activation("relu")(batch_norm(conv_for_batch_norm(filters, 3, stride)(y)));
  y = batch_norm(conv_for_batch_norm(4 * filters, 1, 1)(y));
  SymbolicTensor shortcut = x;
  if (stride != 1 || x.shape().back() != 4 * filters) {
    shortcut = batch_norm(conv_for_batch_norm(4 * filters, 1, stride)(x));
  }
  return Activation("relu")(Add()({y, shortcut}));
}

Model resnet50(const Shape& input_shape, std::int64_t num_classes) {
  if (input_shape.size() != 3) {
    throw InvalidArgument("zoo::build: resnet50 takes images (height, width, channels), got " +
                          shape_str(input_shape));
  }
  const SymbolicTensor inputs = Input(input_shape);
  SymbolicTensor x = Activation("relu")(batch_norm(conv_for_batch_norm(64, 7, 2)(inputs)));
  x = MaxPool2D(3, 2, "same")(x);
  constexpr std::pair<std::int64_t, int> kStages[] = {{64, 3}, {128, 4}, {256, 6}, {512, 3}};
  for (std::size_t stage = 0; stage < std::size(kStages); ++stage) {
    const auto [filters, blocks] = kStages[stage];
    for (int block = 0; block < blocks; ++block) {
      x = bottleneck(x, filters, stage > 0 && block == 0 ? 2 : 1);
    }
  }
  x = GlobalAveragePooling2D()(x);
  const SymbolicTensor outputs = logits(num_classes)(x);
  return Model(inputs, outputs, "resnet50");
}

// One post-layer-norm encoder block: attention and feed-forward sublayers, each added to its
// input and normalised.
SymbolicTensor encoder_block(const SymbolicTensor& x, const TransformerEncoderConfig& config) {
  const std::int64_t key_dim = config.hidden_size / config.heads;
  SymbolicTensor attention = MultiHeadAttention(config.heads, key_dim, config.dropout)(x);
  attention = Dropout(config.dropout)(attention);
  SymbolicTensor y = LayerNormalization(config.layer_norm_epsilon)(Add()({x, attention}));
  SymbolicTensor feed_forward = Dense(config.intermediate_size, "gelu")(y);
  feed_forward = Dropout(config.dropout)(Dense(config.hidden_size)(feed_forward));
  return LayerNormalization(config.layer_norm_epsilon)(Add()({y, feed_forward}));
}

Model bert_base(const Shape& input_shape, std::int64_t num_classes) {
  if (input_shape.size() != 1) {
    throw InvalidArgument(
        "zoo::build: bert_base takes token id sequences, input_shape "
        "{sequence_length}, got " +
        shape_str(input_shape));
  }
  return transformer_encoder(TransformerEncoderConfig{}, input_shape[0], num_classes, "bert_base");
}

using Builder = Model (*)(const Shape&, std::int64_t);
struct ZooModel {
  const char* name;
  Builder builder;
  bool takes_images;  // (N, H, W, C); else token ids (N, sequence_length)
};
constexpr ZooModel kModels[] = {
    {"cnn", cnn, true},
    {"mlp", mlp, true},
    {"resnet_small", resnet_small, true},
    {"resnet50", resnet50, true},
    {"bert_base", bert_base, false},
};

}  // namespace

std::vector<std::string> names() {
  std::vector<std::string> all;
  for (const ZooModel& model : kModels)
    all.emplace_back(model.name);
  return all;
}

std::vector<std::string> image_model_names() {
  std::vector<std::string> images;
  for (const ZooModel& model : kModels) {
    if (model.takes_images) images.emplace_back(model.name);
  }
  return images;
}

Model build(const std::string& name, const Shape& input_shape, std::int64_t num_classes) {
  if (num_classes <= 0) {
    throw InvalidArgument("zoo::build: num_classes must be positive, got " +
                          std::to_string(num_classes));
  }
  for (const ZooModel& model : kModels) {
    if (name == model.name) return model.builder(input_shape, num_classes);
  }
  std::string known_names;
  for (const std::string& known : names())
    known_names += (known_names.empty() ? "" : ", ") + known;
  throw InvalidArgument("zoo::build: unknown model '" + name + "'; choose one of: " + known_names);
}

Model transformer_encoder(const TransformerEncoderConfig& config, std::int64_t sequence_length,
                          std::int64_t num_classes, const std::string& name) {
  const std::string where = "zoo::transformer_encoder: ";
  if (config.vocabulary_size <= 0 || config.hidden_size <= 0 || config.layers < 0 ||
      config.heads <= 0 || config.intermediate_size <= 0) {
    throw InvalidArgument(where +
                          "vocabulary_size, hidden_size, heads and intermediate_size "
                          "must be positive and layers >= 0");
  }
  if (config.hidden_size % config.heads != 0) {
    throw InvalidArgument(where + "hidden_size " + std::to_string(config.hidden_size) +
                          " must be a multiple of heads " + std::to_string(config.heads));
  }
  if (sequence_length <= 0 || sequence_length > config.max_sequence_length) {
    throw InvalidArgument(where + "sequence_length must be in [1, " +
                          std::to_string(config.max_sequence_length) + "], got " +
                          std::to_string(sequence_length));
  }
  if (num_classes <= 0) {
    throw InvalidArgument(where + "num_classes must be positive, got " +
                          std::to_string(num_classes));
  }
  const SymbolicTensor inputs = Input({sequence_length}, DType::i32);
  const SymbolicTensor tokens = Embedding(config.vocabulary_size, config.hidden_size)(inputs);
  const SymbolicTensor positions = PositionEmbedding(config.max_sequence_length)(tokens);
  SymbolicTensor x = LayerNormalization(config.layer_norm_epsilon)(Add()({tokens, positions}));
  x = Dropout(config.dropout)(x);
  for (std::int64_t layer = 0; layer < config.layers; ++layer)
    x = encoder_block(x, config);
  x = GlobalAveragePooling1D()(x);
  const SymbolicTensor outputs = logits(num_classes)(x);
  return Model(inputs, outputs, name);
}

}  // namespace tandem::nn::zoo
