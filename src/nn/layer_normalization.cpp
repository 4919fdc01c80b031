// LayerNormalization over the last axis, on the fused layer_norm op.
#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class LayerNormalizationLayer final : public LayerBase {
 public:
  LayerNormalizationLayer(double epsilon, const std::string& name)
      : LayerBase("layer_normalization", name), epsilon_(epsilon) {
    if (!(epsilon > 0.0)) {
      throw InvalidArgument("LayerNormalization: epsilon must be > 0, got " +
                            std::to_string(epsilon));
    }
  }

  const char* class_name() const override { return "LayerNormalization"; }
  std::optional<LayerConfig> config() const override { return LayerConfig{{"epsilon", epsilon_}}; }

  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.size() < 2 || x.back() <= 0) {
      throw InvalidArgument(detail::describe(*this) +
                            " needs inputs (batch, ..., features) with known features, got " +
                            shape_str(x));
    }
    if (built() && x.back() != gamma_.dim(0)) {
      throw InvalidArgument(detail::describe(*this) + " was built for " +
                            std::to_string(gamma_.dim(0)) + " features, got inputs " +
                            shape_str(x));
    }
    return x;
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    const Tensor& x = inputs[0];  // (..., C)
    // The op takes f32 parameters for a bf16/f16 x; other dtypes keep x's.
    const bool half = x.dtype() == DType::bf16 || x.dtype() == DType::f16;
    const DType parameters = half ? DType::f32 : x.dtype();
    return layer_norm(x, cast(gamma_, parameters), cast(beta_, parameters), epsilon_).y;
  }

 protected:
  void build(std::span<const Shape> input_shapes, DType dtype, Device device) override {
    const Shape features{input_shapes[0].back()};  // (C,)
    // Half-precision layers keep their parameters in f32, as the layer_norm op expects.
    const DType parameters = (dtype == DType::bf16 || dtype == DType::f16) ? DType::f32 : dtype;
    gamma_ = add_weight("gamma", features, Initializer::ones, parameters, device);
    beta_ = add_weight("beta", features, Initializer::zeros, parameters, device);
  }

 private:
  double epsilon_;
  Tensor gamma_;  // (C,)
  Tensor beta_;   // (C,)
};

}  // namespace

LayerNormalization::LayerNormalization(double epsilon, const std::string& name)
    : Layer(std::make_shared<LayerNormalizationLayer>(epsilon, name)) {}

}  // namespace tandem::nn
