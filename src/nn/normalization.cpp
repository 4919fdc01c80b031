// BatchNormalization over the channels (last axis), with moving statistics for inference.
#include "nn/layer_util.h"
#include "tandem/autodiff.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class BatchNormalizationLayer final : public LayerBase {
 public:
  BatchNormalizationLayer(double momentum, double epsilon, const std::string& name)
      : LayerBase("batch_normalization", name), momentum_(momentum), epsilon_(epsilon) {
    if (!(momentum >= 0.0 && momentum <= 1.0)) {
      throw InvalidArgument("BatchNormalization: momentum must be in [0, 1], got " +
                            std::to_string(momentum));
    }
    if (!(epsilon > 0.0)) {
      throw InvalidArgument("BatchNormalization: epsilon must be > 0, got " +
                            std::to_string(epsilon));
    }
  }

  const char* class_name() const override { return "BatchNormalization"; }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{{"momentum", momentum_}, {"epsilon", epsilon_}};
  }

  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    const Shape& x = input_shapes[0];
    if (x.size() < 2 || x.back() <= 0) {
      throw InvalidArgument(detail::describe(*this) +
                            " needs inputs (batch, ..., channels) with known channels, got " +
                            shape_str(x));
    }
    if (built() && x.back() != gamma_.dim(0)) {
      throw InvalidArgument(detail::describe(*this) + " was built for " +
                            std::to_string(gamma_.dim(0)) + " channels, got inputs " +
                            shape_str(x));
    }
    return x;
  }

  Tensor call(std::span<const Tensor> inputs, bool training) override {
    const Tensor& x = inputs[0];  // (..., C)
    // A frozen layer normalises with its moving statistics even while the model trains (Keras).
    if (!training || !trainable()) {
      return batch_norm_inference(x, gamma_, beta_, moving_mean_, moving_variance_, epsilon_);
    }
    BatchNormTrainingResult batch = batch_norm_training(x, gamma_, beta_, epsilon_);
    update_moving_average(moving_mean_, batch.mean);
    update_moving_average(moving_variance_, batch.variance);
    return batch.y;
  }

 protected:
  void build(std::span<const Shape> input_shapes, DType dtype, Device device) override {
    const Shape channels{input_shapes[0].back()};  // (C,)
    // Half-precision inputs keep their statistics in f32, as the batch_norm ops expect.
    const DType stats = (dtype == DType::bf16 || dtype == DType::f16) ? DType::f32 : dtype;
    gamma_ = add_weight("gamma", channels, Initializer::ones, stats, device);
    beta_ = add_weight("beta", channels, Initializer::zeros, stats, device);
    moving_mean_ = add_weight("moving_mean", channels, Initializer::zeros, stats, device,
                              /*trainable=*/false);
    moving_variance_ = add_weight("moving_variance", channels, Initializer::ones, stats, device,
                                  /*trainable=*/false);
  }

 private:
  // moving = momentum * moving + (1 - momentum) * batch, in place: that is one SGD step
  // moving -= (1 - momentum) * (moving - batch), which the in-place sgd_update op runs on the
  // statistics' device. No tape records it: the statistics are not trained.
  void update_moving_average(Tensor& moving, const Tensor& batch) const {
    NoGradGuard no_grad;
    Tensor no_velocity;
    sgd_update(moving, sub(moving, batch), no_velocity,
               update_schedule(1.0 - momentum_, 1, moving.device()));
  }

  double momentum_;
  double epsilon_;
  Tensor gamma_;
  Tensor beta_;
  Tensor moving_mean_;
  Tensor moving_variance_;
};

}  // namespace

BatchNormalization::BatchNormalization(double momentum, double epsilon, const std::string& name)
    : Layer(std::make_shared<BatchNormalizationLayer>(momentum, epsilon, name)) {}

}  // namespace tandem::nn
