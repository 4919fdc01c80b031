// Conv2D: NHWC convolution with a (KH, KW, C_in, filters) kernel, the bias fused into the op.
#include "nn/layer_util.h"
#include "ops/window.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class Conv2DLayer final : public LayerBase {
 public:
  Conv2DLayer(std::int64_t filters, Size2 kernel_size, const Conv2DConfig& options)
      : LayerBase("conv2d", options.name),
        filters_(filters),
        kernel_size_(kernel_size),
        conv_{options.strides.array(),
              detail::parse_argument("Conv2D", [&] { return parse_padding(options.padding); }),
              options.dilation_rate.array()},
        activation_(
            detail::parse_argument("Conv2D", [&] { return parse_activation(options.activation); })),
        use_bias_(options.use_bias),
        kernel_initializer_(detail::parse_argument(
            "Conv2D", [&] { return parse_initializer(options.kernel_initializer); })) {
    detail::require_positive("Conv2D", "filters", filters);
    detail::require_positive("Conv2D", "kernel_size", kernel_size.height);
    detail::require_positive("Conv2D", "kernel_size", kernel_size.width);
    detail::require_positive("Conv2D", "strides", options.strides.height);
    detail::require_positive("Conv2D", "strides", options.strides.width);
    detail::require_positive("Conv2D", "dilation_rate", options.dilation_rate.height);
    detail::require_positive("Conv2D", "dilation_rate", options.dilation_rate.width);
  }

  const char* class_name() const override { return "Conv2D"; }
  std::optional<LayerConfig> config() const override {
    auto pair = [](const std::array<std::int64_t, 2>& values) {
      return std::vector<std::int64_t>(values.begin(), values.end());
    };
    return LayerConfig{{"filters", filters_},
                       {"kernel_size", pair(kernel_size_.array())},
                       {"strides", pair(conv_.strides)},
                       {"padding", std::string(padding_name(conv_.padding))},
                       {"dilation_rate", pair(conv_.dilations)},
                       {"activation", std::string(activation_name(activation_))},
                       {"use_bias", use_bias_},
                       {"kernel_initializer", std::string(initializer_name(kernel_initializer_))}};
  }

  // x (N, H, W, C_in) -> (N, OH, OW, filters)
  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    const std::string op = detail::describe(*this);
    if (x.size() != 4) {
      throw InvalidArgument(op + " needs NHWC inputs (batch, height, width, channels), got " +
                            shape_str(x) + "; reshape them to rank 4");
    }
    const std::int64_t in_channels = built() ? kernel_.dim(2) : x[3];
    const Shape filter{kernel_size_.height, kernel_size_.width, in_channels, filters_};
    return detail::keep_batch(x, [&](const Shape& probe) {
      return conv_window(op.c_str(), probe, filter, conv_).output_shape();
    });
  }

  Tensor call(std::span<const Tensor> inputs, bool) override {
    const Tensor& x = inputs[0];  // (N, H, W, C_in)
    if (const IntegerProduct* integer = integer_product(kernel_, bias_)) {
      return apply_activation(
          activation_, quantized_conv2d(cast(x, DType::f32), integer->input, integer->weights,
                                        integer->weight_scale, integer->bias, conv_));
    }
    const Tensor kernel = kernel_for_call(kernel_, x.dtype());  // (KH, KW, C_in, filters)
    const Tensor y = use_bias_ ? conv2d(x, kernel, cast(bias_, x.dtype()), conv_)
                               : conv2d(x, kernel, conv_);  // (N, OH, OW, filters)
    return apply_activation(activation_, y);
  }

 protected:
  void build(std::span<const Shape> input_shapes, DType dtype, Device device) override {
    kernel_ = add_weight("kernel",
                         {kernel_size_.height, kernel_size_.width, input_shapes[0][3], filters_},
                         kernel_initializer_, dtype, device);  // (KH, KW, C_in, filters)
    if (use_bias_) bias_ = add_weight("bias", {filters_}, Initializer::zeros, dtype, device);
  }

 private:
  std::int64_t filters_;
  Size2 kernel_size_;
  tandem::Conv2DOptions conv_;
  ActivationFunction activation_;
  bool use_bias_;
  Initializer kernel_initializer_;
  Tensor kernel_;
  Tensor bias_;
};

}  // namespace

Conv2D::Conv2D(std::int64_t filters, Size2 kernel_size, const Conv2DConfig& options)
    : Layer(std::make_shared<Conv2DLayer>(filters, kernel_size, options)) {}

Conv2DConfig Conv2D::with_activation(const std::string& activation) {
  Conv2DConfig config;
  config.activation = activation;
  return config;
}

Conv2D::Conv2D(std::int64_t filters, Size2 kernel_size, Size2 strides, const std::string& padding,
               Size2 dilation_rate, const std::string& activation, bool use_bias,
               const std::string& kernel_initializer)
    : Conv2D(filters, kernel_size, [&] {
        Conv2DConfig config;
        config.strides = strides;
        config.padding = padding;
        config.dilation_rate = dilation_rate;
        config.activation = activation;
        config.use_bias = use_bias;
        config.kernel_initializer = kernel_initializer;
        return config;
      }()) {}

}  // namespace tandem::nn
