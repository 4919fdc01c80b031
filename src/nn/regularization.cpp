// Dropout: random zeroing with rescaling while training, the identity in inference.
#include "nn/layer_util.h"
#include "tandem/ops.h"

namespace tandem::nn {
namespace {

class DropoutLayer final : public LayerBase {
 public:
  DropoutLayer(double rate, std::optional<std::uint64_t> seed, const std::string& name)
      : LayerBase("dropout", name),
        rate_(rate),
        generator_(seed.has_value() ? *seed : default_generator().next_seed()) {
    if (!(rate >= 0.0 && rate < 1.0)) {
      throw InvalidArgument("Dropout: rate must be in [0, 1), got " + std::to_string(rate));
    }
  }

  const char* class_name() const override { return "Dropout"; }
  std::optional<LayerConfig> config() const override {
    return LayerConfig{{"rate", rate_}, {"seed", generator_.seed()}};
  }
  Generator* generator() override { return &generator_; }

  Shape compute_output_shape(std::span<const Shape> input_shapes) const override {
    return input_shapes[0];
  }

  Tensor call(std::span<const Tensor> inputs, bool training) override {
    if (!training || rate_ == 0.0) return inputs[0];
    return dropout(inputs[0], rate_, generator_).y;
  }

 private:
  double rate_;
  Generator generator_;
};

}  // namespace

Dropout::Dropout(double rate, std::optional<std::uint64_t> seed, const std::string& name)
    : Layer(std::make_shared<DropoutLayer>(rate, seed, name)) {}

}  // namespace tandem::nn
