// Int8 quantisation simulated with fake_quantize (tandem/quantization.h): the layers' quantizers,
// the calibrators and the int8 weight layout.
#include "tandem/quantization.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <sstream>

#include "tandem/autodiff.h"
#include "tandem/ops.h"
#include "train/kernel_layers.h"

namespace tandem::quantization {
namespace {

// Calibration's histograms of |x|: this many bins from 0 to the largest |x| seen (TensorRT's
// entropy calibrator uses 2048).
constexpr std::int64_t kHistogramBins = 2048;
// The probability the entropy calibrator gives Q's empty bins (MXNet's eps).
constexpr double kSmoothing = 1e-4;
// Weights: symmetric int8 without -128, so a channel's scale maps +max and -max alike.
constexpr std::int64_t kWeightLevels = 127;

// A layer's quantizer. Calibration runs the float model through it twice (the largest |x|, then
// a histogram of |x| up to it) before it quantises.
class Int8Quantizer final : public nn::LayerQuantizer {
 public:
  // quantize: simulated in f32 kernels; integer: the integer kernels run (inference).
  enum class Phase { observe_range, observe_histogram, quantize, integer };

  Tensor input(const Tensor& x) override {
    switch (phase_) {
      case Phase::integer:
        return x;  // quantized_conv2d/quantized_matmul quantise it
      case Phase::observe_range: {
        const NoGradGuard no_grad;
        const Tensor values = cast(x, DType::f32);
        observed_max_ = std::max(observed_max_, reduce_max(abs(values)).item());
        negative_ |= reduce_max(neg(values)).item() > 0.0;
        return x;
      }
      case Phase::observe_histogram: {
        if (observed_max_ <= 0.0) return x;
        const std::vector<float> values = cast(x, DType::f32).to_vector<float>();
        const double bins_per_unit = static_cast<double>(kHistogramBins) / observed_max_;
        for (const float value : values) {
          // Exact zeros (half of a ReLU's outputs) quantise to 0 with any scale: they say
          // nothing about the threshold, and their spike in the first bin would dominate the
          // entropy calibrator's divergence and pull the threshold down.
          if (value == 0.0f) continue;
          const auto bin = static_cast<std::int64_t>(std::fabs(value) * bins_per_unit);
          ++histogram_[static_cast<std::size_t>(std::min(bin, kHistogramBins - 1))];
        }
        return x;
      }
      case Phase::quantize:
        break;
    }
    // Scale and zero point on x's device, made once per device.
    if (!scale_.defined() || scale_.device() != x.device()) {
      scale_ =
          Tensor::from_vector<float>({static_cast<float>(quantization_.scale)}, {}).to(x.device());
      zero_point_ = Tensor::zeros({}, DType::f32, x.device());
    }
    return fake_quantize(x, scale_, zero_point_, quantization_.is_unsigned ? 0 : -128,
                         quantization_.is_unsigned ? 255 : 127)
        .y;
  }

  Tensor kernel(const Tensor& kernel) override {
    if (phase_ != Phase::quantize) return kernel;
    // Per output channel (the last axis): max |w_c| / 127, from the weights as they are now.
    std::vector<std::int64_t> axes(static_cast<std::size_t>(kernel.rank() - 1));
    for (std::size_t axis = 0; axis < axes.size(); ++axis)
      axes[axis] = static_cast<std::int64_t>(axis);
    const Tensor weights = cast(kernel, DType::f32);
    // A channel of zeros (pruned away) keeps a positive scale; its weights stay 0.
    const Tensor scale =
        maximum(reduce_max(abs(weights), axes) / static_cast<double>(kWeightLevels),
                scalar_like(weights, std::numeric_limits<float>::min()));
    const Tensor zero_point = Tensor::zeros({kernel.shape().back()}, DType::f32, kernel.device());
    return cast(fake_quantize(weights, scale, zero_point, -kWeightLevels, kWeightLevels).y,
                kernel.dtype());
  }

  // The int8 weights are made from `kernel` once (again only for another kernel tensor), so the
  // integer kernels see the same weights tensor on every call and keep it in their layout.
  const nn::IntegerProduct* integer_product(const Tensor& kernel, const Tensor& bias) override {
    if (phase_ != Phase::integer) return nullptr;
    if (!integer_ || integer_kernel_id_ != kernel.id()) {
      const Int8Kernel int8 = quantize_kernel(kernel);
      const Device device = kernel.device();
      const Shape channels{kernel.shape().back()};
      integer_ = nn::IntegerProduct{
          {Tensor::from_vector<float>({static_cast<float>(quantization_.scale)}, {}).to(device),
           quantization_.is_unsigned},
          Tensor::from_vector<std::int8_t>(int8.values, kernel.shape()).to(device),
          Tensor::from_vector<float>(int8.scales, channels).to(device),
          bias.defined() ? cast(bias, DType::f32) : Tensor::zeros(channels, DType::f32, device)};
      // Constants: the integer kernels keep them in their layout.
      for (Tensor* tensor : {&integer_->weights, &integer_->weight_scale, &integer_->bias})
        tensor->set_constant(true);
      integer_kernel_id_ = kernel.id();
    }
    return &*integer_;
  }

  std::string signature() const override {
    std::ostringstream text;
    text.precision(17);
    if (phase_ != Phase::quantize && phase_ != Phase::integer) return "calibrating";
    text << (quantization_.is_unsigned ? "uint8" : "int8") << " input scale " << quantization_.scale
         << (phase_ == Phase::integer ? " integer kernels" : "");
    return text.str();
  }

  void set_phase(Phase phase) {
    phase_ = phase;
    if (phase == Phase::observe_histogram) histogram_.assign(kHistogramBins, 0.0);
  }
  double observed_max() const { return observed_max_; }
  bool saw_negative() const { return negative_; }
  const std::vector<double>& histogram() const { return histogram_; }
  void set_quantization(const InputQuantization& quantization) { quantization_ = quantization; }
  // The calibrated input, once the quantizer quantises.
  const InputQuantization* quantization() const {
    return phase_ == Phase::quantize || phase_ == Phase::integer ? &quantization_ : nullptr;
  }

 private:
  Phase phase_ = Phase::observe_range;
  double observed_max_ = 0.0;
  bool negative_ = false;
  std::vector<double> histogram_;
  InputQuantization quantization_;
  Tensor scale_;
  Tensor zero_point_;
  std::optional<nn::IntegerProduct> integer_;
  std::uint64_t integer_kernel_id_ = 0;
};

// The smallest threshold keeping `percentile` % of the histogram's values: the upper edge of the
// bin where the running count reaches it.
double percentile_threshold(const std::vector<double>& histogram, double bin_width,
                            double percentile) {
  double total = 0.0;
  for (const double count : histogram)
    total += count;
  const double wanted = total * percentile / 100.0;
  double running = 0.0;
  for (std::size_t bin = 0; bin < histogram.size(); ++bin) {
    running += histogram[bin];
    if (running >= wanted) return static_cast<double>(bin + 1) * bin_width;
  }
  return static_cast<double>(histogram.size()) * bin_width;
}

// TensorRT's entropy calibration: for each candidate threshold (the upper edge of bin i, from
// `levels` bins on), the reference distribution P is the histogram up to i with everything above
// folded into its last bin, and Q is that histogram merged into `levels` quantisation bins and
// spread back evenly over each one's non-empty bins; the threshold with the smallest KL(P || Q)
// wins.
double entropy_threshold(const std::vector<double>& histogram, double bin_width,
                         std::int64_t levels) {
  const auto bins = static_cast<std::int64_t>(histogram.size());
  double best_divergence = std::numeric_limits<double>::infinity();
  std::int64_t best = bins;
  std::vector<double> reference;
  std::vector<double> expanded;
  for (std::int64_t i = levels; i <= bins; ++i) {
    reference.assign(histogram.begin(), histogram.begin() + i);
    for (std::int64_t rest = i; rest < bins; ++rest)
      reference.back() += histogram[static_cast<std::size_t>(rest)];
    expanded.assign(static_cast<std::size_t>(i), 0.0);
    for (std::int64_t level = 0; level < levels; ++level) {
      const std::int64_t start = level * i / levels;
      const std::int64_t stop = (level + 1) * i / levels;
      double sum = 0.0;
      std::int64_t occupied = 0;
      for (std::int64_t bin = start; bin < stop; ++bin) {
        sum += histogram[static_cast<std::size_t>(bin)];
        occupied += histogram[static_cast<std::size_t>(bin)] > 0.0;
      }
      for (std::int64_t bin = start; bin < stop; ++bin) {
        if (histogram[static_cast<std::size_t>(bin)] > 0.0)
          expanded[static_cast<std::size_t>(bin)] = sum / static_cast<double>(occupied);
      }
    }
    double reference_total = 0.0, expanded_total = 0.0;
    for (std::size_t bin = 0; bin < reference.size(); ++bin) {
      reference_total += reference[bin];
      expanded_total += expanded[bin];
    }
    if (reference_total <= 0.0 || expanded_total <= 0.0) continue;
    // Q smoothed as MXNet's calibrator does: kSmoothing moved onto Q's empty bins from its
    // others, so mass P puts where Q has none (folded outliers past an empty stretch) costs a
    // finite divergence.
    std::int64_t empty = 0;
    for (const double value : expanded)
      empty += value <= 0.0;
    const double taken = kSmoothing * static_cast<double>(empty) /
                         static_cast<double>(static_cast<std::int64_t>(expanded.size()) - empty);
    double divergence = 0.0;
    for (std::size_t bin = 0; bin < reference.size(); ++bin) {
      const double p = reference[bin] / reference_total;
      if (p <= 0.0) continue;
      const double q = expanded[bin] > 0.0
                           ? std::max(expanded[bin] / expanded_total - taken, kSmoothing)
                           : kSmoothing;
      divergence += p * std::log(p / q);
    }
    if (divergence < best_divergence) {
      best_divergence = divergence;
      best = i;
    }
  }
  return static_cast<double>(best) * bin_width;
}

void check_options(const QuantizeOptions& options) {
  if (!(options.percentile > 0.0 && options.percentile <= 100.0)) {
    throw InvalidArgument("quantize_model: percentile must be in (0, 100], got " +
                          std::to_string(options.percentile));
  }
  if (options.calibration_batches < 0) {
    throw InvalidArgument("quantize_model: calibration_batches must be 0 (all) or more, got " +
                          std::to_string(options.calibration_batches));
  }
}

// Runs up to `limit` batches of `data` through the model in inference; returns the batch count.
std::int64_t run_calibration(nn::Model& model, const data::Dataset& data, std::int64_t limit) {
  const NoGradGuard no_grad;
  const std::unique_ptr<data::BatchIterator> batches = data.iterate(0);
  std::int64_t count = 0;
  while (limit == 0 || count < limit) {
    std::optional<data::Batch> batch = batches->next();
    if (!batch) break;
    try {
      model(batch->features, /*training=*/false);
    } catch (const InvalidArgument& error) {
      throw InvalidArgument(
          std::string("quantize_model: the calibration set does not fit model '") + model.name() +
          "': " + error.what());
    }
    ++count;
  }
  return count;
}

}  // namespace

const char* calibrator_name(Calibrator calibrator) {
  switch (calibrator) {
    case Calibrator::min_max:
      return "minmax";
    case Calibrator::percentile:
      return "percentile";
    case Calibrator::entropy:
      return "entropy";
  }
  return "?";
}

Calibrator parse_calibrator(const std::string& name) {
  for (const Calibrator calibrator :
       {Calibrator::min_max, Calibrator::percentile, Calibrator::entropy}) {
    if (name == calibrator_name(calibrator)) return calibrator;
  }
  throw InvalidArgument("unknown calibrator '" + name + "'; use minmax, percentile or entropy");
}

Quantization::Quantization(std::vector<nn::Layer> layers, std::vector<InputQuantization> inputs)
    : layers_(std::move(layers)), inputs_(std::move(inputs)) {}

void Quantization::strip() {
  for (const nn::Layer& layer : layers_)
    layer.impl().set_quantizer(nullptr);
  stripped_ = true;
}

std::shared_ptr<Quantization> quantize_model(nn::Model& model, const data::Dataset& calibration,
                                             QuantizeOptions options) {
  check_options(options);
  if (!model.built()) {
    throw InvalidArgument("quantize_model: model '" + model.name() +
                          "' is not built; build it or train it first");
  }
  const std::vector<train::detail::KernelLayer> layers =
      train::detail::kernel_layers(model, options.layers, "quantize_model", "quantise");
  std::vector<std::shared_ptr<Int8Quantizer>> quantizers;
  for (const train::detail::KernelLayer& found : layers) {
    quantizers.push_back(std::make_shared<Int8Quantizer>());
    found.layer.impl().set_quantizer(quantizers.back());
  }
  std::vector<InputQuantization> inputs;
  try {
    if (run_calibration(model, calibration, options.calibration_batches) == 0) {
      throw InvalidArgument(
          "quantize_model: the calibration set is empty; give a few hundred "
          "examples of the training data");
    }
    if (options.calibrator != Calibrator::min_max) {
      for (const auto& quantizer : quantizers)
        quantizer->set_phase(Int8Quantizer::Phase::observe_histogram);
      run_calibration(model, calibration, options.calibration_batches);
    }
    for (std::size_t i = 0; i < layers.size(); ++i) {
      Int8Quantizer& quantizer = *quantizers[i];
      InputQuantization input;
      input.layer = layers[i].layer.name();
      input.is_unsigned = !quantizer.saw_negative();
      input.observed_max = quantizer.observed_max();
      const std::int64_t levels = input.is_unsigned ? 255 : 127;
      const double bin_width = input.observed_max / static_cast<double>(kHistogramBins);
      switch (options.calibrator) {
        case Calibrator::min_max:
          input.threshold = input.observed_max;
          break;
        case Calibrator::percentile:
          input.threshold =
              percentile_threshold(quantizer.histogram(), bin_width, options.percentile);
          break;
        case Calibrator::entropy:
          input.threshold = entropy_threshold(quantizer.histogram(), bin_width, levels);
          break;
      }
      // An input that was always 0 (a dead channel set) quantises to 0 with any scale.
      input.scale = input.threshold > 0.0 ? input.threshold / static_cast<double>(levels) : 1.0;
      quantizer.set_quantization(input);
      quantizer.set_phase(Int8Quantizer::Phase::quantize);
      inputs.push_back(input);
    }
  } catch (...) {
    for (const train::detail::KernelLayer& found : layers)
      found.layer.impl().set_quantizer(nullptr);
    throw;
  }
  std::vector<nn::Layer> quantized;
  for (const train::detail::KernelLayer& found : layers)
    quantized.push_back(found.layer);
  return std::make_shared<Quantization>(std::move(quantized), std::move(inputs));
}

std::vector<InputQuantization> quantized_inputs(const nn::Model& model) {
  std::vector<InputQuantization> inputs;
  for (const nn::Layer& layer : model.layers()) {
    const auto* quantizer = dynamic_cast<const Int8Quantizer*>(layer.impl().quantizer().get());
    if (quantizer != nullptr && quantizer->quantization() != nullptr) {
      inputs.push_back(*quantizer->quantization());
    }
  }
  return inputs;
}

namespace {

// Puts quantizers with these calibrated inputs on `model`'s layers, in `phase`.
std::shared_ptr<Quantization> quantize_with(nn::Model& model,
                                            const std::vector<InputQuantization>& inputs,
                                            Int8Quantizer::Phase phase) {
  std::vector<std::string> names;
  for (const InputQuantization& input : inputs) {
    if (!(input.scale > 0.0) || !std::isfinite(input.scale)) {
      throw InvalidArgument("restore_quantization: layer '" + input.layer + "' has the scale " +
                            std::to_string(input.scale) + "; scales are positive");
    }
    names.push_back(input.layer);
  }
  if (names.empty()) throw InvalidArgument("restore_quantization: no layer to quantise");
  const std::vector<train::detail::KernelLayer> layers =
      train::detail::kernel_layers(model, names, "restore_quantization", "quantise");
  std::vector<nn::Layer> quantized;
  for (const train::detail::KernelLayer& found : layers) {
    const auto input = std::find_if(inputs.begin(), inputs.end(), [&](const InputQuantization& i) {
      return i.layer == found.layer.name();
    });
    auto quantizer = std::make_shared<Int8Quantizer>();
    quantizer->set_quantization(*input);
    quantizer->set_phase(phase);
    found.layer.impl().set_quantizer(quantizer);
    quantized.push_back(found.layer);
  }
  return std::make_shared<Quantization>(std::move(quantized), inputs);
}

}  // namespace

std::shared_ptr<Quantization> restore_quantization(nn::Model& model,
                                                   const std::vector<InputQuantization>& inputs) {
  return quantize_with(model, inputs, Int8Quantizer::Phase::quantize);
}

nn::Model integer_model(const nn::Model& model) {
  const std::vector<InputQuantization> inputs = quantized_inputs(model);
  if (inputs.empty()) {
    throw InvalidArgument("integer_model: model '" + model.name() +
                          "' has no quantised layer; quantise it first (quantize_model, or "
                          "`tandem train --quantize int8`)");
  }
  nn::Model folded = nn::fold_batch_norms(model);
  quantize_with(folded, inputs, Int8Quantizer::Phase::integer);
  return folded;
}

Int8Kernel quantize_kernel(const Tensor& kernel) {
  const std::vector<float> values = cast(kernel, DType::f32).to_vector<float>();
  const auto channels = static_cast<std::size_t>(kernel.shape().back());
  Int8Kernel quantized;
  quantized.scales.assign(channels, 0.0f);
  for (std::size_t i = 0; i < values.size(); ++i)
    quantized.scales[i % channels] = std::max(quantized.scales[i % channels], std::fabs(values[i]));
  // As the quantizer computes it: max / 127 in f32, at least the smallest positive float.
  for (float& scale : quantized.scales)
    scale = std::max(scale / static_cast<float>(kWeightLevels), std::numeric_limits<float>::min());
  quantized.values.reserve(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const float q = std::nearbyint(values[i] / quantized.scales[i % channels]);
    quantized.values.push_back(static_cast<std::int8_t>(
        std::clamp(q, -static_cast<float>(kWeightLevels), static_cast<float>(kWeightLevels))));
  }
  return quantized;
}

std::vector<std::uint8_t> int8_weight_bytes(const nn::Model& model) {
  const std::vector<InputQuantization> inputs = quantized_inputs(model);
  std::vector<std::uint8_t> bytes;
  const auto append = [&](const void* data, std::size_t size) {
    const std::size_t start = bytes.size();
    bytes.resize(start + size);
    std::memcpy(bytes.data() + start, data, size);
  };
  for (const nn::Layer& layer : model.layers()) {
    const bool quantized =
        std::any_of(inputs.begin(), inputs.end(),
                    [&](const InputQuantization& input) { return input.layer == layer.name(); });
    for (const Tensor& weight : layer.weights()) {
      if (quantized && weight.name() == layer.name() + "/kernel") {
        const Int8Kernel kernel = quantize_kernel(weight);
        append(kernel.scales.data(), kernel.scales.size() * sizeof(float));
        append(kernel.values.data(), kernel.values.size());
      } else {
        const std::vector<float> values = cast(weight, DType::f32).to_vector<float>();
        append(values.data(), values.size() * sizeof(float));
      }
    }
  }
  return bytes;
}

}  // namespace tandem::quantization
