// Pooling layers: MaxPool2D, AveragePooling2D (windows over NHWC) and GlobalAveragePooling2D.
#include "nn/layer_util.h"
#include "ops/window.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

enum class PoolKind { max, average };

class Pool2DLayer final : public LayerBase {
 public:
  Pool2DLayer(PoolKind kind, Size2 pool_size, std::optional<Size2> strides,
              const std::string& padding, const std::string& name)
      : LayerBase(kind == PoolKind::max ? "max_pooling2d" : "average_pooling2d", name),
        kind_(kind),
        pool_{pool_size.array(), strides.value_or(pool_size).array(),
              detail::parse_argument(class_name(), [&] { return parse_padding(padding); })} {
    const Size2 steps = strides.value_or(pool_size);
    detail::require_positive(class_name(), "pool_size", pool_size.height);
    detail::require_positive(class_name(), "pool_size", pool_size.width);
    detail::require_positive(class_name(), "strides", steps.height);
    detail::require_positive(class_name(), "strides", steps.width);
  }

  const char* class_name() const override {
    return kind_ == PoolKind::max ? "MaxPooling2D" : "AveragePooling2D";
  }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{
        {"pool_size", std::vector<std::int64_t>(pool_.window.begin(), pool_.window.end())},
        {"strides", std::vector<std::int64_t>(pool_.strides.begin(), pool_.strides.end())},
        {"padding", std::string(padding_name(pool_.padding))}};
  }

  // x (N, H, W, C) -> (N, OH, OW, C)
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const std::string op = detail::describe(*this);
    return detail::keep_batch(input_shapes[0], [&](const Shape& probe) {
      return pool_window(op.c_str(), probe, pool_).output_shape();
    });
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    return kind_ == PoolKind::max ? max_pool2d(inputs[0], pool_) : avg_pool2d(inputs[0], pool_);
  }

 private:
  PoolKind kind_;
  Pool2DOptions pool_;
};

class GlobalAveragePooling2DLayer final : public LayerBase {
 public:
  explicit GlobalAveragePooling2DLayer(const std::string& name)
      : LayerBase("global_average_pooling2d", name) {}

  const char* class_name() const override { return "GlobalAveragePooling2D"; }
  std::optional<LayerConfig> config() const override { return LayerConfig{}; }

  // x (N, H, W, C) -> (N, C)
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.size() != 4) {
      throw InvalidArgument(detail::describe(*this) +
                            " needs NHWC inputs (batch, height, width, channels), got " +
                            shape_str(x));
    }
    return {x[0], x[3]};
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    return global_avg_pool2d(inputs[0]);
  }
};

}  // namespace

MaxPool2D::MaxPool2D(Size2 pool_size, std::optional<Size2> strides, const std::string& padding,
                     const std::string& name)
    : Layer(std::make_shared<Pool2DLayer>(PoolKind::max, pool_size, strides, padding, name)) {}

AveragePooling2D::AveragePooling2D(Size2 pool_size, std::optional<Size2> strides,
                                   const std::string& padding, const std::string& name)
    : Layer(std::make_shared<Pool2DLayer>(PoolKind::average, pool_size, strides, padding, name)) {}

GlobalAveragePooling2D::GlobalAveragePooling2D(const std::string& name)
    : Layer(std::make_shared<GlobalAveragePooling2DLayer>(name)) {}

}  // namespace tandem::nn
