// Dense: y = activation(x @ kernel + bias), with the bias fused into the matmul.
#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class DenseLayer final : public LayerBase {
 public:
  DenseLayer(std::int64_t units, const std::string& activation, bool use_bias,
             const std::string& kernel_initializer, const std::string& name)
      : LayerBase("dense", name),
        units_(units),
        activation_(detail::parse_argument("Dense", [&] { return parse_activation(activation); })),
        use_bias_(use_bias),
        kernel_initializer_(detail::parse_argument(
            "Dense", [&] { return parse_initializer(kernel_initializer); })) {
    detail::require_positive("Dense", "units", units);
  }

  const char* class_name() const override { return "Dense"; }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{{"units", units_},
                       {"activation", std::string(activation_name(activation_))},
                       {"use_bias", use_bias_},
                       {"kernel_initializer", std::string(initializer_name(kernel_initializer_))}};
  }

  // x (..., in) -> (..., units)
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.size() < 2 || x.back() <= 0) {
      throw InvalidArgument(detail::describe(*this) + " needs inputs (batch, ..., features) with " +
                            "a known feature count, got " + shape_str(x) +
                            "; add Flatten() before it for images");
    }
    if (built() && x.back() != kernel_.dim(0)) {
      throw InvalidArgument(detail::describe(*this) + " was built for " +
                            std::to_string(kernel_.dim(0)) + " input features, got inputs " +
                            shape_str(x));
    }
    Shape y = x;
    y.back() = units_;
    return y;
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    const Tensor& x = inputs[0];  // (..., in)
    if (const IntegerProduct* integer = integer_product(kernel_, bias_)) {
      return apply_activation(
          activation_, quantized_matmul(cast(x, DType::f32), integer->input, integer->weights,
                                        integer->weight_scale, integer->bias));
    }
    const Tensor kernel = kernel_for_call(kernel_, x.dtype());  // (in, units)
    const Tensor y =
        use_bias_ ? matmul(x, kernel, cast(bias_, x.dtype())) : matmul(x, kernel);  // (..., units)
    return apply_activation(activation_, y);
  }

 protected:
  void build(std::span<const Shape> input_shapes, DType dtype, Device device) override {
    kernel_ = add_weight("kernel", {input_shapes[0].back(), units_}, kernel_initializer_, dtype,
                         device);  // (in, units)
    if (use_bias_) bias_ = add_weight("bias", {units_}, Initializer::zeros, dtype, device);
  }

 private:
  std::int64_t units_;
  ActivationFunction activation_;
  bool use_bias_;
  Initializer kernel_initializer_;
  Tensor kernel_;
  Tensor bias_;
};

}  // namespace

Dense::Dense(std::int64_t units, const std::string& activation, bool use_bias,
             const std::string& kernel_initializer, const std::string& name)
    : Layer(std::make_shared<DenseLayer>(units, activation, use_bias, kernel_initializer, name)) {}

}  // namespace tandem::nn
