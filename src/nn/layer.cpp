// The layer base class, the shared Layer handle (eager and symbolic calls) and unique names.
#include <map>
#include <mutex>

#include "core/tensor_copy.h"
#include "nn/layer_util.h"
#include "tandem/nn.h"
#include "tandem/ops.h"

namespace tandem::nn {
using detail::describe;

namespace {

struct NameCounters {
  std::mutex mutex;
  std::map<std::string, int> used;  // per prefix: names handed out so far
};

NameCounters& name_counters() {
  static NameCounters counters;
  return counters;
}

void require_arity(const LayerBase& layer, std::size_t count) {
  const int arity = layer.arity();
  if (arity == 0 && count < 2) {
    throw InvalidArgument(describe(layer) + " takes two or more inputs, got " +
                          std::to_string(count) + "; call it on a list: layer({a, b})");
  }
  if (arity > 0 && count != static_cast<std::size_t>(arity)) {
    throw InvalidArgument(describe(layer) + " takes " + std::to_string(arity) + " input" +
                          (arity == 1 ? "" : "s") + ", got " + std::to_string(count));
  }
}

}  // namespace

namespace detail {

std::string unique_name(const std::string& prefix) {
  NameCounters& counters = name_counters();
  std::lock_guard lock(counters.mutex);
  const int index = counters.used[prefix]++;
  return index == 0 ? prefix : prefix + "_" + std::to_string(index);
}

std::string describe(const LayerBase& layer) {
  return std::string(layer.class_name()) + " '" + layer.name() + "'";
}

void require_positive(const std::string& layer, const char* argument, std::int64_t value) {
  if (value <= 0) {
    throw InvalidArgument(layer + ": " + argument + " must be positive, got " +
                          std::to_string(value));
  }
}

}  // namespace detail

void clear_session() {
  NameCounters& counters = name_counters();
  std::lock_guard lock(counters.mutex);
  counters.used.clear();
}

LayerNameCounters layer_name_counters() {
  NameCounters& counters = name_counters();
  std::lock_guard lock(counters.mutex);
  return counters.used;
}

void set_layer_name_counters(const LayerNameCounters& used) {
  NameCounters& counters = name_counters();
  std::lock_guard lock(counters.mutex);
  counters.used = used;
}

// ---- LayerBase ----

LayerBase::LayerBase(const std::string& prefix, const std::string& name)
    : name_(name.empty() ? detail::unique_name(prefix) : name),
      dtype_policy_(mixed_precision::global_policy()) {}

LayerBase::~LayerBase() = default;

void LayerBase::ensure_built(std::span<const Shape> input_shapes, DType dtype, Device device) {
  if (built_) return;
  // Checks the inputs fit before any weight exists, so a bad shape leaves the layer unbuilt.
  compute_output_shape(input_shapes);
  const DType variable_dtype =
      dtype_policy_ ? dtype_policy_->variable_dtype() : (is_floating(dtype) ? dtype : DType::f32);
  build(input_shapes, variable_dtype, device);
  built_ = true;
}

void LayerBase::set_dtype_policy(std::optional<mixed_precision::Policy> policy) {
  if (built_) {
    throw InvalidArgument(describe(*this) +
                          ": the dtype policy must be set before the layer is "
                          "built (its weights exist already)");
  }
  dtype_policy_ = std::move(policy);
}

DType LayerBase::compute_dtype(DType input_dtype) const {
  return dtype_policy_ ? dtype_policy_->compute_dtype() : input_dtype;
}

DType LayerBase::output_dtype(DType input_dtype) const {
  return is_floating(input_dtype) ? compute_dtype(input_dtype) : input_dtype;
}

Tensor LayerBase::invoke(std::span<const Tensor> inputs, bool training) {
  if (!dtype_policy_ && !quantizer_) return call(inputs, training);
  std::vector<Tensor> prepared(inputs.begin(), inputs.end());
  if (dtype_policy_) {
    const DType compute = dtype_policy_->compute_dtype();
    for (Tensor& input : prepared) {
      if (is_floating(input.dtype())) input = cast(input, compute);
    }
  }
  if (quantizer_) prepared[0] = quantizer_->input(prepared[0]);
  return call(prepared, training);
}

void LayerBase::set_quantizer(std::shared_ptr<LayerQuantizer> quantizer) {
  quantizer_ = std::move(quantizer);
}

Tensor LayerBase::kernel_for_call(const Tensor& kernel, DType compute_dtype) const {
  return cast(quantizer_ ? quantizer_->kernel(kernel) : kernel, compute_dtype);
}

const IntegerProduct* LayerBase::integer_product(const Tensor& kernel, const Tensor& bias) const {
  return quantizer_ ? quantizer_->integer_product(kernel, bias) : nullptr;
}

void LayerBase::set_trainable(bool trainable) {
  trainable_ = trainable;
  for (Weight& weight : weights_)
    weight.tensor.set_variable(trainable && weight.trainable);
}

std::vector<Tensor> LayerBase::weights() const {
  std::vector<Tensor> all;
  all.reserve(weights_.size());
  for (const Weight& weight : weights_)
    all.push_back(weight.tensor);
  return all;
}

std::vector<Tensor> LayerBase::trainable_weights() const {
  std::vector<Tensor> trainable;
  for (const Weight& weight : weights_) {
    if (trainable_ && weight.trainable) trainable.push_back(weight.tensor);
  }
  return trainable;
}

std::vector<Tensor> LayerBase::non_trainable_weights() const {
  std::vector<Tensor> frozen;
  for (const Weight& weight : weights_) {
    if (!(trainable_ && weight.trainable)) frozen.push_back(weight.tensor);
  }
  return frozen;
}

Tensor LayerBase::add_weight(const std::string& name, const Shape& shape, Initializer initializer,
                             DType dtype, Device device, bool trainable) {
  Tensor weight;
  try {
    weight = initialize(initializer, shape, dtype).to(device);
  } catch (const OutOfMemory& error) {
    // Which layer asked for how much: a model file with 10^12 units otherwise reads as a bare
    // "out of memory ... 2459 TiB".
    throw OutOfMemory(
        describe(*this) + ": its weight '" + name + "' " + shape_str(shape) + " " +
            dtype_name(dtype) + " does not fit (" + error.what() + "); make the layer smaller",
        error.device(), error.requested_bytes(), error.held_bytes(), error.available_bytes());
  }
  weight.set_name(name_ + "/" + name);
  weight.set_variable(trainable && trainable_);
  weights_.push_back(Weight{weight, trainable});
  return weight;
}

// ---- Layer ----

Layer::Layer(std::shared_ptr<LayerBase> impl) : impl_(std::move(impl)) {}

LayerBase& Layer::impl() const {
  if (!impl_) {
    throw InvalidArgument(
        "nn::Layer: this layer handle is empty; construct a layer (e.g. nn::Dense(10)) first");
  }
  return *impl_;
}

Tensor Layer::operator()(const Tensor& x, bool training) const {
  LayerBase& layer = impl();
  require_arity(layer, 1);
  if (!layer.built()) {
    const Shape shape = x.shape();
    layer.ensure_built({&shape, 1}, x.dtype(), x.device());
  }
  return layer.invoke({&x, 1}, training);
}

Tensor Layer::operator()(const std::vector<Tensor>& xs, bool training) const {
  LayerBase& layer = impl();
  require_arity(layer, xs.size());
  if (!layer.built()) {
    std::vector<Shape> shapes;
    for (const Tensor& x : xs)
      shapes.push_back(x.shape());
    layer.ensure_built(shapes, xs[0].dtype(), xs[0].device());
  }
  return layer.invoke(xs, training);
}

SymbolicTensor Layer::operator()(const SymbolicTensor& x) const {
  return (*this)(std::vector<SymbolicTensor>{x});
}

SymbolicTensor Layer::operator()(const std::vector<SymbolicTensor>& xs) const {
  LayerBase& layer = impl();
  require_arity(layer, xs.size());
  std::vector<Shape> shapes;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].node()) {
      throw InvalidArgument(describe(layer) + ": input " + std::to_string(i) +
                            " is an empty SymbolicTensor; start the graph with nn::Input(shape)");
    }
    shapes.push_back(xs[i].shape());
  }
  auto node = std::make_shared<Node>();
  node->shape = layer.compute_output_shape(shapes);
  layer.ensure_built(shapes, xs[0].dtype(), Device::cpu());
  node->layer = *this;
  node->inputs = xs;
  node->dtype = layer.output_dtype(xs[0].dtype());
  node->name = layer.name();
  return SymbolicTensor(std::move(node));
}

Layer Layer::with_dtype_policy(const std::string& policy) const {
  impl().set_dtype_policy(mixed_precision::Policy(policy));
  return *this;
}

void Layer::set_weights(const std::vector<Tensor>& values) const {
  const std::vector<Tensor> current = weights();
  if (values.size() != current.size()) {
    std::string expected;
    for (const Tensor& weight : current) {
      expected += (expected.empty() ? "" : ", ") + weight.name() + " " + shape_str(weight.shape());
    }
    throw InvalidArgument(describe(impl()) + ".set_weights: expects " +
                          std::to_string(current.size()) + " tensors (" +
                          (built() ? expected : "the layer is not built yet; call it once") +
                          "), got " + std::to_string(values.size()));
  }
  for (std::size_t i = 0; i < values.size(); ++i) {
    tandem::detail::copy_into(current[i], values[i],
                              describe(impl()) + ".set_weights: " + current[i].name());
  }
}

std::int64_t Layer::count_params() const {
  std::int64_t count = 0;
  for (const Tensor& weight : weights())
    count += weight.numel();
  return count;
}

}  // namespace tandem::nn
