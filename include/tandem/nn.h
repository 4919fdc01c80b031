#pragma once
// Keras-style layers and models. Layers build lazily from the first input shape they see; their
// weights are tensors marked as variables, so every GradientTape watches them. Models chain
// layers (Sequential) or wire them as a graph with branches (the functional API):
//
//   auto inputs = nn::Input({28, 28, 1});
//   auto x = nn::Conv2D(16, 3, {.padding = "same", .activation = "relu"})(inputs);
//   auto y = nn::Conv2D(16, 3, {.padding = "same"})(x);
//   auto outputs = nn::Activation("relu")(nn::Add()({x, y}));
//   nn::Model model(inputs, outputs);
//
// Model's training methods (compile, fit, evaluate, predict) are implemented by the train layer
// (src/train/fit.cpp) and take the types of tandem/train.h.
#include <array>
#include <concepts>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "tandem/mixed_precision.h"
#include "tandem/ops.h"
#include "tandem/random.h"
#include "tandem/tensor.h"
#include "tandem/train.h"

namespace tandem::data {
class Dataset;
}

namespace tandem::nn {

// ---------------------------------------------------------------------------------------------
// Initializers and activations (by Keras name).
// ---------------------------------------------------------------------------------------------
enum class Initializer {
  glorot_uniform,
  glorot_normal,
  he_normal,
  he_uniform,
  zeros,
  ones,
  uniform
};
// "glorot_uniform", ...; throws InvalidArgument listing the names for an unknown one.
Initializer parse_initializer(const std::string& name);
const char* initializer_name(Initializer initializer);

// Fans of a weight shape as Keras computes them: (in, out) for a matrix; for a convolution
// kernel (KH, KW, C_in, C_out), receptive field KH * KW times C_in and C_out.
struct Fans {
  double fan_in = 1;
  double fan_out = 1;
};
Fans compute_fans(const Shape& shape);

// Draws a weight of `shape` the way Keras' initializer of that name does: glorot_uniform
// U(-sqrt(6 / (fan_in + fan_out)), +...), glorot_normal truncated normal (2 std devs) with
// variance 2 / (fan_in + fan_out), he_normal truncated normal with variance 2 / fan_in,
// he_uniform U(-sqrt(6 / fan_in), +...), zeros, ones, uniform U(-0.05, 0.05) (Keras' "uniform",
// the Embedding default).
Tensor initialize(Initializer initializer, const Shape& shape, DType dtype = DType::f32,
                  Generator& generator = default_generator());

enum class ActivationFunction {
  linear,
  relu,
  gelu,
  sigmoid,
  tanh,
  softmax,
  elu,
  selu,
  softplus,
  softsign,
  swish,
  exponential,
  hard_sigmoid,
  mish,
  relu6,
  leaky_relu,
};
// The activation= strings Keras 2.15 accepts, with its definitions: "linear" (or ""), "relu",
// "gelu", "sigmoid", "tanh", "softmax", "elu", "selu", "softplus", "softsign", "swish" ("silu"
// reads as it, as Keras saves it), "exponential", "hard_sigmoid" (Keras 2's: clip(0.2 x + 0.5, 0,
// 1)), "mish", and TensorFlow's functions Keras takes by name, "relu6" and "leaky_relu" (slope
// 0.2); throws InvalidArgument listing the names for an unknown one.
ActivationFunction parse_activation(const std::string& name);
// SELU's constants (Klambauer et al. 2017), as Keras and TensorFlow have them.
inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;
// tf.nn.leaky_relu's default slope, which activation="leaky_relu" gets.
inline constexpr double kLeakyReluSlope = 0.2;
const char* activation_name(ActivationFunction activation);
// softmax is over the last axis; gelu is exact (erf), as in Keras.
Tensor apply_activation(ActivationFunction activation, const Tensor& x);

// An image extent pair (height, width) that a single number fills, as Keras' kernel_size=3.
struct Size2 {
  Size2(std::int64_t both) : height(both), width(both) {}
  Size2(std::int64_t height_, std::int64_t width_) : height(height_), width(width_) {}
  std::array<std::int64_t, 2> array() const { return {height, width}; }
  std::int64_t height;
  std::int64_t width;
};

// ---------------------------------------------------------------------------------------------
// Layers.
// ---------------------------------------------------------------------------------------------
class Layer;
class SymbolicTensor;

// A layer's constructor arguments by their Keras names (Keras' get_config), e.g. {"units": 64,
// "activation": "relu"}: what a saved model stores to make the layer again. Seeds are unsigned.
using ConfigValue =
    std::variant<bool, std::int64_t, std::uint64_t, double, std::string, std::vector<std::int64_t>>;
using LayerConfig = std::map<std::string, ConfigValue>;

// What a Dense or Conv2D layer runs quantized_matmul or quantized_conv2d (tandem/ops.h) with.
struct IntegerProduct {
  QuantizedInput input;
  Tensor weights;       // i8, the kernel's shape
  Tensor weight_scale;  // (C_out,) f32
  Tensor bias;          // (C_out,) f32: the layer's, or zeros
};

// Quantisation of a layer (tandem/quantization.h makes them). Simulated: a layer with one passes
// its input through input() before call(), and Dense and Conv2D pass their kernel through
// kernel() (output channels last), so the forward pass computes what the integer kernels will.
// Integer (an int8 model for inference): Dense and Conv2D run the integer kernels on what
// integer_product() gives, and input() leaves x as it is.
class LayerQuantizer {
 public:
  virtual ~LayerQuantizer() = default;
  virtual Tensor input(const Tensor& x) = 0;
  virtual Tensor kernel(const Tensor& kernel) = 0;
  // The integer kernels' operands for the layer's `kernel` and `bias` (undefined: none), or
  // nullptr while the quantizer simulates.
  virtual const IntegerProduct* integer_product(const Tensor& kernel, const Tensor& bias) {
    return nullptr;
  }
  // What decides the graph the quantizer adds (its mode and fixed ranges): part of the compiled
  // training step's signature, so a change retraces the step.
  virtual std::string signature() const = 0;
};

// What a layer is and does. Built-in layers subclass it in src/nn/; a custom layer subclasses it
// too and is used through Layer(std::make_shared<MyLayer>(...)).
class LayerBase {
 public:
  // `prefix` is the snake-case kind ("conv2d"); an empty `name` takes the next free unique one
  // ("conv2d", "conv2d_1", ...), as Keras names layers.
  LayerBase(const std::string& prefix, const std::string& name);
  virtual ~LayerBase();
  LayerBase(const LayerBase&) = delete;
  LayerBase& operator=(const LayerBase&) = delete;

  // The class name shown by Model::summary ("Conv2D").
  virtual const char* class_name() const = 0;
  // Inputs the layer takes: 1, or 0 for "two or more" (Add).
  virtual int arity() const { return 1; }
  // Output shape for inputs of these shapes; a leading -1 is an unknown batch size. Throws
  // InvalidArgument naming the layer when the inputs do not fit it.
  virtual Shape compute_output_shape(std::span<const Shape> input_shapes) const = 0;
  // Forward pass on built weights.
  virtual Tensor call(std::span<const Tensor> inputs, bool training) = 0;

  // Creates the weights for inputs of these shapes and dtype on first use.
  void ensure_built(std::span<const Shape> input_shapes, DType dtype, Device device);
  bool built() const { return built_; }

  // Mixed precision: the dtype policy the layer took from the global one when it was made
  // (nullopt when none was set: the layer then computes in its first input's dtype). Under a
  // policy the weights are made in its variable dtype and call() sees floating inputs cast to
  // its compute dtype.
  const std::optional<mixed_precision::Policy>& dtype_policy() const { return dtype_policy_; }
  // Before the layer is built (Keras' dtype= argument); throws InvalidArgument after. nullopt:
  // no policy, the layer computes in its first input's dtype (what load_model restores).
  void set_dtype_policy(std::optional<mixed_precision::Policy> policy);
  // The dtype the layer computes in for a floating input of `input_dtype`.
  DType compute_dtype(DType input_dtype) const;
  // The dtype of the layer's output for a first input of `input_dtype`: its compute dtype for a
  // floating input, the input's dtype otherwise (layers that turn ids into vectors override it).
  virtual DType output_dtype(DType input_dtype) const;
  // What models and Layer::operator() run: call() on inputs cast to the compute dtype.
  Tensor invoke(std::span<const Tensor> inputs, bool training);

  const std::string& name() const { return name_; }
  // Frozen layers (trainable false) keep their weights out of trainable_weights and out of
  // every tape.
  bool trainable() const { return trainable_; }
  void set_trainable(bool trainable);
  std::vector<Tensor> weights() const;
  std::vector<Tensor> trainable_weights() const;
  std::vector<Tensor> non_trainable_weights() const;

  // The arguments that make this layer again through make_layer(class_name(), name(), config());
  // nothing for a layer that cannot be saved (a custom layer that does not override it).
  virtual std::optional<LayerConfig> config() const { return std::nullopt; }
  // The random stream the layer draws from while training (Dropout's masks), if any, so a
  // checkpoint can keep its position.
  virtual Generator* generator() { return nullptr; }

  // The layer's simulated quantisation (nullptr: none, the default; tandem/quantization.h).
  const std::shared_ptr<LayerQuantizer>& quantizer() const { return quantizer_; }
  void set_quantizer(std::shared_ptr<LayerQuantizer> quantizer);

 protected:
  virtual void build(std::span<const Shape> input_shapes, DType dtype, Device device) {}
  // A weight named "<layer>/<name>", drawn from the default generator.
  Tensor add_weight(const std::string& name, const Shape& shape, Initializer initializer,
                    DType dtype, Device device, bool trainable = true);
  // `kernel` (output channels last) as call() uses it: through the quantizer, if any, and cast
  // to the compute dtype (mixed precision keeps the variables in float32).
  Tensor kernel_for_call(const Tensor& kernel, DType compute_dtype) const;
  // The quantizer's integer operands for `kernel` and `bias`, or nullptr (no quantizer, or one
  // that simulates).
  const IntegerProduct* integer_product(const Tensor& kernel, const Tensor& bias) const;

 private:
  struct Weight {
    Tensor tensor;
    bool trainable;
  };
  std::string name_;
  bool built_ = false;
  bool trainable_ = true;
  std::vector<Weight> weights_;
  std::optional<mixed_precision::Policy> dtype_policy_;
  std::shared_ptr<LayerQuantizer> quantizer_;
};

// A handle to a layer, shared by every place that uses it (models, graph nodes): copies refer to
// the same layer and weights. The layer classes below only add constructors.
class Layer {
 public:
  Layer() = default;
  explicit Layer(std::shared_ptr<LayerBase> impl);

  // Eager call; builds the layer from x's shape on first use. training selects Dropout's and
  // BatchNormalization's training behaviour.
  Tensor operator()(const Tensor& x, bool training = false) const;
  Tensor operator()(const std::vector<Tensor>& xs, bool training = false) const;
  // Functional API: adds a node to the graph.
  SymbolicTensor operator()(const SymbolicTensor& x) const;
  SymbolicTensor operator()(const std::vector<SymbolicTensor>& xs) const;

  bool defined() const { return impl_ != nullptr; }
  const std::string& name() const { return impl().name(); }
  bool built() const { return impl().built(); }
  std::vector<Tensor> weights() const { return impl().weights(); }
  std::vector<Tensor> trainable_weights() const { return impl().trainable_weights(); }
  std::vector<Tensor> non_trainable_weights() const { return impl().non_trainable_weights(); }
  // Copies values into the weights (in weights() order); shapes must match.
  void set_weights(const std::vector<Tensor>& values) const;
  std::int64_t count_params() const;
  void set_trainable(bool trainable) const { impl().set_trainable(trainable); }
  bool trainable() const { return impl().trainable(); }
  // Gives the layer this dtype policy (e.g. "float32" for the final layer of a mixed-precision
  // model, as Keras' dtype="float32") and returns the handle: Dense(10).with_dtype_policy(...).
  Layer with_dtype_policy(const std::string& policy) const;

  LayerBase& impl() const;
  const std::shared_ptr<LayerBase>& ptr() const { return impl_; }

 private:
  std::shared_ptr<LayerBase> impl_;
};

// y = activation(x @ kernel + bias); kernel (in, units).
class Dense : public Layer {
 public:
  explicit Dense(std::int64_t units, const std::string& activation = "linear", bool use_bias = true,
                 const std::string& kernel_initializer = "glorot_uniform",
                 const std::string& name = "");
};

struct Conv2DConfig {
  Size2 strides = 1;
  std::string padding = "valid";  // "valid" or "same"
  Size2 dilation_rate = 1;
  std::string activation = "linear";
  bool use_bias = true;
  std::string kernel_initializer = "glorot_uniform";
  std::string name;
};

// NHWC convolution, kernel (KH, KW, C_in, filters), bias fused into the convolution.
class Conv2D : public Layer {
 public:
  Conv2D(std::int64_t filters, Size2 kernel_size, const Conv2DConfig& options = {});
  // Conv2D(32, 3, "relu"). A template so that a braced Conv2DConfig never matches it.
  template <std::convertible_to<std::string> Name>
  Conv2D(std::int64_t filters, Size2 kernel_size, const Name& activation)
      : Conv2D(filters, kernel_size, with_activation(activation)) {}
  // Keras' positional order.
  Conv2D(std::int64_t filters, Size2 kernel_size, Size2 strides,
         const std::string& padding = "valid", Size2 dilation_rate = 1,
         const std::string& activation = "linear", bool use_bias = true,
         const std::string& kernel_initializer = "glorot_uniform");

 private:
  static Conv2DConfig with_activation(const std::string& activation);
};

// strides default to pool_size, as in Keras.
class MaxPool2D : public Layer {
 public:
  explicit MaxPool2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                     const std::string& padding = "valid", const std::string& name = "");
};
using MaxPooling2D = MaxPool2D;

class AveragePooling2D : public Layer {
 public:
  explicit AveragePooling2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                            const std::string& padding = "valid", const std::string& name = "");
};
using AvgPool2D = AveragePooling2D;

// (N, H, W, C) -> (N, C)
class GlobalAveragePooling2D : public Layer {
 public:
  explicit GlobalAveragePooling2D(const std::string& name = "");
};

// (N, ...) -> (N, product of the rest)
class Flatten : public Layer {
 public:
  explicit Flatten(const std::string& name = "");
};

// Training: zeroes each element with probability `rate` and scales the rest by 1 / (1 - rate);
// inference: identity. The mask comes from the layer's own generator, seeded from `seed` or,
// when none is given, from the default generator when the layer is made.
class Dropout : public Layer {
 public:
  explicit Dropout(double rate, std::optional<std::uint64_t> seed = std::nullopt,
                   const std::string& name = "");
};

// Normalises over every axis but the last (channels). Training uses the batch statistics and
// moves moving_mean / moving_variance towards them: moving = momentum * moving + (1 - momentum)
// * batch (the biased batch variance, as Keras 3); inference uses the moving statistics.
// Weights: gamma, beta (trainable), moving_mean, moving_variance (non-trainable). A frozen
// (trainable false) layer always runs in inference mode, as in Keras.
class BatchNormalization : public Layer {
 public:
  explicit BatchNormalization(double momentum = 0.99, double epsilon = 1e-3,
                              const std::string& name = "");
};

// An activation function as a layer: "relu", "gelu", "sigmoid", "tanh", "softmax", "linear".
class Activation : public Layer {
 public:
  explicit Activation(const std::string& activation, const std::string& name = "");
};

// Element-wise sum of two or more inputs of one shape (residual connections).
class Add : public Layer {
 public:
  explicit Add(const std::string& name = "");
};

// Integer ids (..., ) in [0, input_dim), i32 or i64, -> (..., output_dim) rows of a trainable
// (input_dim, output_dim) table (Keras' Embedding; "uniform" draws U(-0.05, 0.05)). Trains by
// scatter-adding the rows' gradients. An id outside the table is an error naming it.
class Embedding : public Layer {
 public:
  Embedding(std::int64_t input_dim, std::int64_t output_dim,
            const std::string& embeddings_initializer = "uniform", const std::string& name = "");
};

// Learned positions (keras_nlp's PositionEmbedding): for x (batch, length, features) with
// length <= sequence_length, the first `length` rows of a trainable (sequence_length, features)
// table, broadcast to x's shape, to be added to the token embeddings.
class PositionEmbedding : public Layer {
 public:
  explicit PositionEmbedding(std::int64_t sequence_length,
                             const std::string& initializer = "glorot_uniform",
                             const std::string& name = "");
};

// Normalises every position over its features (the last axis): (x - mean) / sqrt(variance +
// epsilon) * gamma + beta, as Keras' LayerNormalization(axis=-1). Weights gamma (ones) and beta
// (zeros); a mixed-precision layer keeps them in float32.
class LayerNormalization : public Layer {
 public:
  explicit LayerNormalization(double epsilon = 1e-3, const std::string& name = "");
};

// Multi-head self-attention, as Keras' MultiHeadAttention called as mha(x, x): x (batch, length,
// features) is projected to num_heads queries, keys and values of key_dim each;
// softmax(q k^T / sqrt(key_dim)) v per head from batched matmuls, dropout on the attention
// weights while training, then a projection back to `features`. Weights: query, key, value
// (features, num_heads * key_dim) and output (num_heads * key_dim, features) kernels with biases.
class MultiHeadAttention : public Layer {
 public:
  MultiHeadAttention(std::int64_t num_heads, std::int64_t key_dim, double dropout = 0.0,
                     std::optional<std::uint64_t> seed = std::nullopt,
                     const std::string& name = "");
};

// (batch, steps, features) -> (batch, features): the mean over the steps.
class GlobalAveragePooling1D : public Layer {
 public:
  explicit GlobalAveragePooling1D(const std::string& name = "");
};

// Makes a layer from its class name ("Dense"), name and config (LayerBase::config): the built-in
// layers and those added with register_layer. Throws InvalidArgument naming the class and the
// missing, unknown or mistyped argument.
Layer make_layer(const std::string& class_name, const std::string& name, const LayerConfig& config);
// Teaches make_layer (and so load_model) a custom layer class.
using LayerFactory = std::function<Layer(const std::string& name, const LayerConfig& config)>;
void register_layer(const std::string& class_name, LayerFactory factory);

// Resets the counters behind unique layer names, so the next Dense is "dense" again (like
// keras.backend.clear_session()).
void clear_session();
// The counters themselves: the names handed out so far, per prefix ("dense" -> 3). A training run
// names its model's layers as a fresh process would (clear_session), so that its checkpoints fit
// the model of the run that resumes them, in this process or another; it then puts back the
// program's counters, raised to what the run used, so that names stay unique.
using LayerNameCounters = std::map<std::string, int>;
LayerNameCounters layer_name_counters();
void set_layer_name_counters(const LayerNameCounters& counters);

// ---------------------------------------------------------------------------------------------
// Functional API.
// ---------------------------------------------------------------------------------------------
struct Node;

// A placeholder for a layer's output in a graph being defined (Keras' KerasTensor); its shape
// has -1 for the unknown batch size.
class SymbolicTensor {
 public:
  SymbolicTensor() = default;
  explicit SymbolicTensor(std::shared_ptr<const Node> node);
  const Shape& shape() const;
  DType dtype() const;
  const std::shared_ptr<const Node>& node() const { return node_; }

 private:
  std::shared_ptr<const Node> node_;
};

// A graph node: the model input (no layer) or a layer applied to earlier nodes.
struct Node {
  Layer layer;  // undefined for an input
  std::vector<SymbolicTensor> inputs;
  Shape shape;  // with -1 for the batch size
  DType dtype = DType::f32;
  std::string name;  // the input's name, or the layer's
};

// The model input: `shape` without the batch dimension, e.g. {28, 28, 1}.
SymbolicTensor Input(const Shape& shape, DType dtype = DType::f32, const std::string& name = "");

// ---------------------------------------------------------------------------------------------
// Models.
// ---------------------------------------------------------------------------------------------
class Model {
 public:
  // A functional model from its input to its output; every path from the output must lead back
  // to `inputs`.
  Model(const SymbolicTensor& inputs, const SymbolicTensor& outputs, const std::string& name = "");
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  virtual ~Model();

  const std::string& name() const;

  // Forward pass on a batch (N, ...); builds a Sequential on first use. Throws InvalidArgument
  // when x does not match the model's input shape.
  Tensor call(const Tensor& x, bool training = false);
  Tensor operator()(const Tensor& x, bool training = false) { return call(x, training); }

  // Builds a Sequential for inputs of `input_shape` (without the batch dimension).
  void build(const Shape& input_shape, DType dtype = DType::f32);
  bool built() const;
  // (None, ...) shapes with -1 for the batch size; need a built model.
  const Shape& input_shape() const;
  const Shape& output_shape() const;

  // Each layer once, in the order the forward pass first uses them.
  std::vector<Layer> layers() const;
  // The graph in evaluation order, every node after its inputs: nodes()[0] is the input (what
  // exporters walk). Needs a built model.
  const std::vector<std::shared_ptr<const Node>>& nodes() const;
  Layer get_layer(const std::string& name) const;
  std::vector<Tensor> weights() const;
  std::vector<Tensor> trainable_weights() const;
  // BatchNormalization's moving statistics and frozen layers' weights.
  std::vector<Tensor> non_trainable_weights() const;
  std::int64_t count_params() const;

  // A Keras-style table of layers, output shapes and parameter counts (functional models also
  // show what each layer is connected to), and the totals.
  void summary(std::ostream& out) const;
  void summary() const;
  std::string summary_string() const;

  // ---- training (src/train/fit.cpp) ----
  // model.compile({.optimizer = train::Adam(1e-3),
  //                .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
  //                .metrics = {"accuracy"}});
  void compile(const train::CompileOptions& options);
  bool compiled() const;
  // Whether fit runs the training step compiled (CompileOptions::jit_compile and whether the
  // step can be).
  bool jit_compiled() const;
  // The nodes and memory plan of the training step fit last ran compiled
  // (CompiledStep::listing); empty when none has run.
  std::string compiled_step_listing() const;
  train::Optimizer& optimizer() const;
  const train::Loss& loss() const;
  std::vector<std::shared_ptr<train::Metric>> metrics() const;
  // fit's running mean of the epoch's loss (the "loss" log), which checkpoints keep.
  train::Mean& loss_tracker() const;

  // Trains on every batch of `dataset`, options.epochs times: model.fit(dataset, {.epochs = 10}).
  train::History fit(const data::Dataset& dataset, const train::FitOptions& options = {});
  // Trains on tensors x (N, ...) and y (N, ...) in batches of options.batch_size (32 unset),
  // holding out the last options.validation_split of the examples for validation and shuffling
  // the rest every epoch (options.shuffle, options.seed).
  train::History fit(const Tensor& x, const Tensor& y, const train::FitOptions& options = {});

  // Writes the model to `directory` (created if need be; a saved model there is replaced, any
  // other content refused): the architecture as JSON (model.json) and the weights as
  // safetensors (model.safetensors), checksummed, the folder swapped in whole so a crash leaves
  // the old model or the new. `class_names` (optional) name the outputs for `tandem predict`.
  // tandem::load_model reads it back (src/io/saved_model.cpp).
  void save(const std::string& directory, const std::vector<std::string>& class_names = {}) const;

  // Mean loss and metrics over the dataset: {"loss": ..., "accuracy": ...}.
  train::Logs evaluate(const data::Dataset& dataset);
  train::Logs evaluate(const Tensor& x, const Tensor& y, std::int64_t batch_size = 32);
  // Outputs for x (N, ...) in batches, in inference mode and without any tape.
  Tensor predict(const Tensor& x, std::int64_t batch_size = 32);

  // One optimisation step on one batch, and one evaluation of a batch; each returns that batch's
  // loss and metrics.
  train::Logs train_on_batch(const Tensor& x, const Tensor& y);
  train::Logs test_on_batch(const Tensor& x, const Tensor& y);

  // 0 silent, 1 progress bar (the default), 2 one line per epoch; fit's FitOptions::verbose
  // overrides it for one call.
  void set_verbose(int verbose);
  int verbose() const;
  // A callback sets this to end fit: after the current step when set by a batch callback, after
  // the current epoch when set at its end (as EarlyStopping does).
  void set_stop_training(bool stop);
  bool stop_training() const;

  struct State;

 protected:
  explicit Model(const std::string& name);
  State& state() const { return *state_; }

 private:
  std::unique_ptr<State> state_;
};

// A linear stack of layers, built from the first input (or by build()).
class Sequential : public Model {
 public:
  explicit Sequential(std::vector<Layer> layers = {}, const std::string& name = "");
  // Appends a layer; a built model checks at once that it fits the previous output.
  void add(const Layer& layer);
};

// The model rebuilt for inference: each BatchNormalization that only normalises a Conv2D's or
// Dense's output is folded into that layer's kernel and bias (the layer gains a bias), as
// inference engines fold it; every other layer is rebuilt with its weights. It predicts what
// `model` does, to rounding, with one pass over memory fewer per folded pair. Its weights are
// copies and constants (Tensor::is_constant), so the kernels keep their filters in the layouts
// they run (they cannot be trained or set). Throws InvalidArgument for an unbuilt model or a
// custom layer without a config.
Model fold_batch_norms(const Model& model);

// ---------------------------------------------------------------------------------------------
// Model zoo.
// ---------------------------------------------------------------------------------------------
namespace zoo {
// "cnn": the TensorFlow CNN tutorial: Conv2D 32 3x3 relu, MaxPool2D, Conv2D 64 3x3 relu,
//        MaxPool2D, Flatten, Dense 64 relu, Dense num_classes (logits).
// "mlp": Flatten, Dense 128 relu, Dense num_classes (logits).
// "resnet_small": a small residual CNN (functional): a 16-filter stem, three residual blocks of
//        16, 32 and 64 filters (the last two halve the resolution and project the shortcut with a
//        1x1 convolution), each Conv2D -> BatchNormalization -> ReLU, global average pooling,
//        Dense num_classes (logits).
// "resnet50": ResNet-50 v1.5, NHWC (He et al. with the stride on the 3x3 convolution of each
//        bottleneck, as TensorFlow's and torchvision's): 7x7/2 stem, 3x3/2 max pooling,
//        [3, 4, 6, 3] bottleneck blocks of 64-512 (x4) filters, global average pooling,
//        Dense num_classes; 25.6 M weights for 1000 classes.
// "bert_base": a BERT-base-sized transformer encoder (transformer_encoder with the defaults of
//        TransformerEncoderConfig) over token ids; input_shape is {sequence_length} (<= 512).
std::vector<std::string> names();
// The models of names() that take images (N, H, W, C), as an image data set trains them.
std::vector<std::string> image_model_names();
// input_shape without the batch dimension, e.g. {28, 28, 1}. An unknown name throws
// InvalidArgument listing names().
Model build(const std::string& name, const Shape& input_shape, std::int64_t num_classes);

// A post-layer-norm transformer encoder as BERT's: token and position embeddings, summed and
// normalised; `layers` blocks of multi-head self-attention and a GELU feed-forward network,
// each with dropout, a residual connection and layer normalisation; then the mean over the
// sequence and Dense num_classes (logits). Inputs are (sequence_length,) i32 token ids.
struct TransformerEncoderConfig {
  std::int64_t vocabulary_size = 30522;
  std::int64_t max_sequence_length = 512;
  std::int64_t hidden_size = 768;
  std::int64_t layers = 12;
  std::int64_t heads = 12;
  std::int64_t intermediate_size = 3072;
  double dropout = 0.1;
  double layer_norm_epsilon = 1e-12;
};
Model transformer_encoder(const TransformerEncoderConfig& config, std::int64_t sequence_length,
                          std::int64_t num_classes,
                          const std::string& name = "transformer_encoder");
}  // namespace zoo

}  // namespace tandem::nn
