// `tandem predict --model DIR INPUT...`: loads a saved model and prints the top classes of each
// image. Inputs are recognised by their content: IDX files of images (gzipped or not, as
// Fashion-MNIST ships them), PNG and JPEG (through tandem::image) and PGM (P2 and P5, 8 or 16
// bits). Pixels are scaled to [0, 1] as the training data was; an image of another size is
// resized, another channel count converted.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <numeric>
#include <sstream>

#include "cli/commands.h"
#include "cli/inference.h"
#include "core/files.h"
#include "core/tensor_copy.h"
#include "core/text.h"
#include "tandem/autodiff.h"
#include "tandem/bench.h"
#include "tandem/data.h"
#include "tandem/image.h"
#include "tandem/io.h"
#include "tandem/ops.h"
#include "tandem/quantization.h"
#include "tandem/runtime.h"

namespace tandem::cli {
namespace {

constexpr std::int64_t kDefaultTop = 3;
constexpr std::int64_t kPredictBatch = 256;

bool starts_with(const std::vector<std::uint8_t>& bytes, std::initializer_list<int> prefix) {
  if (bytes.size() < prefix.size()) return false;
  return std::equal(prefix.begin(), prefix.end(), bytes.begin(),
                    [](int expected, std::uint8_t actual) { return expected == actual; });
}

// One image (H, W, C) f32 in [0, 1] fitted to the model's (height, width, channels).
Tensor fit_image(Tensor image, const Shape& target, const std::string& what) {
  const std::int64_t channels = target[2];
  if (image.dim(2) != channels) {
    if (image.dim(2) == 2 && channels == 1) {  // grey and alpha: the grey
      image = slice(image, {0, 0, 0}, {-1, -1, 1});
    } else if (image.dim(2) >= 3 && channels == 1) {
      image = mean(slice(image, {0, 0, 0}, {-1, -1, 3}), {2}, /*keepdims=*/true);
    } else if (image.dim(2) == 1 && channels == 3) {
      image = concat({image, image, image}, 2);
    } else {
      throw InvalidArgument(what + " has " + std::to_string(image.dim(2)) +
                            " channels; the model takes " + std::to_string(channels));
    }
  }
  if (image.dim(0) != target[0] || image.dim(1) != target[1]) {
    std::cerr << "tandem: note: " << what << " is " << image.dim(1) << "x" << image.dim(0)
              << ", resized to the model's " << target[1] << "x" << target[0] << "\n";
    image = image::resize(image, target[0], target[1]);
  }
  return image;
}

struct Inputs {
  Tensor images;  // (N, H, W, C) f32
  std::vector<std::string> labels;
};

// The images in `path`, fitted to the model's input.
Inputs read_inputs(const std::string& path, const Shape& target) {
  const std::vector<std::uint8_t> bytes = read_whole_file(path);
  Inputs inputs;
  if (starts_with(bytes, {0x1F, 0x8B}) || starts_with(bytes, {0, 0})) {
    Tensor images = data::read_idx(path);  // (N, H, W) or (N, H, W, C)
    if (images.rank() == 3) {
      images = reshape(images, {images.dim(0), images.dim(1), images.dim(2), 1});
    }
    if (images.rank() != 4) {
      throw InvalidArgument(path + " holds IDX data of shape " + shape_str(images.shape()) +
                            ", not images (N, H, W) or (N, H, W, C)");
    }
    const double scale = images.dtype() == DType::u8 ? 1.0 / 255.0 : 1.0;
    images = cast(images, DType::f32) * scale;  // (N, H, W, C)
    const Shape image_shape(images.shape().begin() + 1, images.shape().end());
    std::vector<Tensor> fitted;
    for (std::int64_t i = 0; i < images.dim(0); ++i) {
      inputs.labels.push_back(path + "[" + std::to_string(i) + "]");
      if (image_shape == target) continue;  // no image needs fitting
      const Tensor image = reshape(slice(images, {i, 0, 0, 0}, {1, -1, -1, -1}), image_shape);
      fitted.push_back(reshape(fit_image(image, target, inputs.labels.back()),
                               {1, target[0], target[1], target[2]}));
    }
    if (image_shape == target) {
      inputs.images = images;
    } else {
      inputs.images = fitted.size() == 1 ? fitted[0] : concat(fitted, 0);
    }
    return inputs;
  }
  Tensor image;
  if (bytes.size() >= 2 && bytes[0] == 'P' && (bytes[1] == '2' || bytes[1] == '5')) {
    image = image::decode_pgm(bytes, path);
  } else if (starts_with(bytes, {0x89, 'P', 'N', 'G'}) || starts_with(bytes, {0xFF, 0xD8, 0xFF})) {
    Tensor encoded = Tensor::empty({static_cast<std::int64_t>(bytes.size())}, DType::u8);
    std::memcpy(encoded.raw_data(), bytes.data(), bytes.size());
    image = cast(image::decode(encoded, {}, path), DType::f32) * (1.0 / 255.0);  // (H, W, C)
  } else {
    throw InvalidArgument(path +
                          " is not an input tandem predict reads: give an IDX file of "
                          "images (gzipped or not), a PNG, a JPEG or a PGM image");
  }
  inputs.images = reshape(fit_image(image, target, path), {1, target[0], target[1], target[2]});
  inputs.labels.push_back(path);
  return inputs;
}

// Rows of probabilities: the outputs as they are when they already are (non-negative, summing
// to 1), else their softmax (the zoo's models give logits).
std::vector<std::vector<double>> probabilities(const Tensor& outputs) {
  const std::int64_t classes = outputs.dim(-1);
  std::vector<double> values = outputs.to_vector<double>();
  bool already = true;
  for (std::int64_t row = 0; row * classes < static_cast<std::int64_t>(values.size()); ++row) {
    double total = 0.0;
    for (std::int64_t k = 0; k < classes; ++k) {
      const double value = values[static_cast<std::size_t>(row * classes + k)];
      already &= value >= 0.0;
      total += value;
    }
    already &= std::abs(total - 1.0) < 1e-4;
  }
  const Tensor normalized = already ? outputs : softmax(outputs, -1);
  values = normalized.to_vector<double>();
  std::vector<std::vector<double>> rows;
  for (std::size_t start = 0; start < values.size(); start += static_cast<std::size_t>(classes)) {
    rows.emplace_back(values.begin() + static_cast<std::ptrdiff_t>(start),
                      values.begin() + static_cast<std::ptrdiff_t>(start + classes));
  }
  return rows;
}

}  // namespace

namespace {

struct PredictOptions {
  std::string model_dir;
  std::int64_t top = kDefaultTop;
  std::int64_t batch_size = kPredictBatch;
  bool timing = false;
};

const OptionTable<PredictOptions>& predict_options() {
  using O = PredictOptions;
  static const OptionTable<O> table(
      {
          {"--model", "DIR", "the saved model's directory (required)", into(&O::model_dir)},
          {"--top", "K", "classes to print per image (default " + std::to_string(O{}.top) + ")",
           into(&O::top, parse_positive_integer)},
          {"--batch-size", "N",
           "images per call of the model (default " + std::to_string(O{}.batch_size) + ")",
           into(&O::batch_size, parse_positive_integer)},
          {"--timing", "",
           "also time the model: its size, batch-1 latency percentiles over up to 200 images, "
           "and throughput at --batch-size over the inputs (median of 5 passes)",
           flag(&O::timing)},
      },
      {[](O& options, const ParsedArgs&) {
        if (options.model_dir.empty()) {
          throw UsageError("'tandem predict' needs --model DIR, the directory of a saved model");
        }
      }});
  return table;
}

// --timing: the model's size (its weights as stored; a quantised model's int8 layout), the
// latency of one image at a time and the throughput of batches, each after a warm-up call.
void print_timing(const nn::Model& model, InferenceModel& inference, const Tensor& images,
                  std::int64_t batch_size, std::ostream& out) {
  out << "timing: model '" << model.name() << "', " << model.count_params() << " weights, "
      << format_memory_size(inference_model_bytes(model))
      << (inference.quantized() ? " (int8)" : " (f32)") << "; " << inference.description() << "\n";
  const std::int64_t count = images.dim(0);
  const std::int64_t singles = std::min<std::int64_t>(count, 200);
  std::int64_t next = 0;
  const std::vector<double> latency = bench::time_calls(
      [&] {
        const Tensor one = tandem::detail::rows(images, next++ % singles, 1);
        (void)inference.predict(one, 1).to_vector<float>();
      },
      1, static_cast<int>(singles));
  out << "timing: batch 1, " << singles << " images: latency p50 "
      << fixed(1e3 * bench::quantile(latency, 0.50), 2) << " ms, p90 "
      << fixed(1e3 * bench::quantile(latency, 0.90), 2) << " ms, p99 "
      << fixed(1e3 * bench::quantile(latency, 0.99), 2) << " ms\n";
  std::vector<double> rates;
  for (const double seconds : bench::time_calls(
           [&] { (void)inference.predict(images, batch_size).to_vector<float>(); }, 1, 5))
    rates.push_back(static_cast<double>(count) / seconds);
  out << "timing: batch " << std::min(batch_size, count) << ", " << count
      << " images: " << fixed(bench::quantile(rates, 0.50), 1) << " images/s (median of 5 passes, "
      << fixed(*std::min_element(rates.begin(), rates.end()), 1) << "-"
      << fixed(*std::max_element(rates.begin(), rates.end()), 1) << "), " << num_threads()
      << " threads\n";
}

}  // namespace

const CommandSpec& predict_spec() {
  static const CommandSpec spec = [] {
    CommandSpec command{
        "predict",
        "Classify images with a saved model; print the top classes",
        "tandem predict --model DIR [options] INPUT...",
        "Loads the model that `tandem train --save-model DIR` (or Model::save) wrote and prints,\n"
        "for every image, its most likely classes with their probabilities. An INPUT is an IDX\n"
        "file of images (gzipped or not, e.g. Fashion-MNIST's t10k-images-idx3-ubyte.gz; every\n"
        "image in it), or a PNG, JPEG or PGM (P2/P5, 8 or 16 bits) image. Pixels are scaled to\n"
        "[0, 1] as in training; images of another size are resized, colour made grey or grey\n"
        "made colour to fit the model.",
        predict_options().specs(),
    };
    command.operands = "INPUT...";
    return command;
  }();
  return spec;
}

int run_predict(const ParsedArgs& args) {
  const PredictOptions options = predict_options().read(args);
  const io::SavedModelInfo info = io::read_saved_model_info(options.model_dir);
  if (info.input_shape.size() != 3) {
    throw InvalidArgument("the model in " + options.model_dir + " takes inputs " +
                          shape_str(info.input_shape) +
                          "; tandem predict classifies images (H, W, C)");
  }
  nn::Model model = io::load_model(options.model_dir);
  // A compiled graph per batch size is expected here; its log lines are not the user's business.
  set_compile_log([](const std::string&) {});
  InferenceModel inference(model);
  std::vector<Tensor> all_images;
  for (const std::string& path : args.operands()) {
    const Inputs inputs = read_inputs(path, info.input_shape);
    if (options.timing) all_images.push_back(inputs.images);
    const std::vector<std::vector<double>> rows =
        probabilities(inference.predict(inputs.images, options.batch_size));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::vector<double>& row = rows[i];
      std::vector<std::size_t> order(row.size());
      std::iota(order.begin(), order.end(), std::size_t{0});
      const std::size_t shown = std::min(order.size(), static_cast<std::size_t>(options.top));
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(shown),
                        order.end(), [&](std::size_t a, std::size_t b) { return row[a] > row[b]; });
      std::cout << inputs.labels[i] << ":";
      for (std::size_t k = 0; k < shown; ++k) {
        const std::size_t label = order[k];
        std::cout << (k ? ", " : " ")
                  << (label < info.class_names.size() ? info.class_names[label]
                                                      : "class " + std::to_string(label))
                  << " " << fixed(row[label], 4);
      }
      std::cout << "\n";
    }
  }
  if (options.timing) {
    print_timing(model, inference, concat(all_images, 0), options.batch_size, std::cout);
  }
  return 0;
}

}  // namespace tandem::cli
