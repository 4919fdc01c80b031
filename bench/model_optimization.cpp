// Accuracy and size of the main job's CNN on Fashion-MNIST after each of Tandem's model
// optimisations, in one run from one trained model: fp32; magnitude pruning to 50% and 80%
// (ConstantSparsity and PolynomialDecay, TF-MOT's pruning tutorial's recipe) and 2:4, each
// fine-tuned from the fp32 weights; int8 post-training quantisation with each calibrator; int8
// quantisation-aware training from the calibrated model. Every fine-tuning (pruning, QAT) runs
// F epochs at 1e-4, and so does a control: the fp32 model fine-tuned as long without either. Size
// is the weights as a deployment stores them (f32, or int8 kernels with per-channel scales), raw
// and compressed with gzip -9, as TF-MOT's tutorials measure the gain of zeros.
//
//   build/bench/model_optimization [--epochs E] [--fine-tune-epochs F] [--data DIR] [--out DIR]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tandem/data.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

struct Settings {
  std::int64_t epochs = 5;
  std::int64_t fine_tune_epochs = 2;
  std::int64_t batch = 64;
  std::string data = data::kFashionMnistDefaultDir;
  std::string out = "model_optimization";
};

struct Row {
  std::string name;
  double accuracy = 0;
  double sparsity = 0;  // of the Dense and Conv2D kernels
  std::size_t raw_bytes = 0;
  std::size_t gzip_bytes = 0;
};

void compile(nn::Model& model, double learning_rate) {
  model.compile({.optimizer = train::Adam(learning_rate),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  model.set_verbose(0);
}

// The fp32 weights, every one in the model's order.
std::vector<std::uint8_t> float_weight_bytes(const nn::Model& model) {
  std::vector<std::uint8_t> bytes;
  for (const Tensor& weight : model.weights()) {
    const std::vector<float> values = cast(weight, DType::f32).to_vector<float>();
    const std::size_t start = bytes.size();
    bytes.resize(start + values.size() * sizeof(float));
    std::memcpy(bytes.data() + start, values.data(), values.size() * sizeof(float));
  }
  return bytes;
}

// `bytes` written to `path`, and the size of `gzip -9` of it.
std::size_t gzip_size(const std::vector<std::uint8_t>& bytes, const std::string& path) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  const std::string command = "gzip -9 -k -f '" + path + "'";
  if (std::system(command.c_str()) != 0) throw Error("model_optimization: " + command + " failed");
  return std::filesystem::file_size(path + ".gz");
}

double kernel_sparsity(const nn::Model& model) {
  double zeros = 0, total = 0;
  for (const nn::Layer& layer : model.layers()) {
    for (const Tensor& weight : layer.weights()) {
      if (weight.name() != layer.name() + "/kernel") continue;
      for (const float value : weight.to_vector<float>())
        zeros += value == 0.0f;
      total += static_cast<double>(weight.numel());
    }
  }
  return total > 0 ? zeros / total : 0.0;
}

Row measure(const std::string& name, nn::Model& model, const data::ImageClassificationData& data,
            const std::vector<std::uint8_t>& bytes, const Settings& settings) {
  Row row{name};
  row.accuracy = model.evaluate(data.test_images, data.test_labels, 256).at("accuracy");
  row.sparsity = kernel_sparsity(model);
  row.raw_bytes = bytes.size();
  row.gzip_bytes = gzip_size(bytes, settings.out + "/" + name + ".weights");
  std::printf("%-28s accuracy %.4f  sparsity %.3f  %zu bytes, %zu gzipped\n", name.c_str(),
              row.accuracy, row.sparsity, row.raw_bytes, row.gzip_bytes);
  std::fflush(stdout);
  return row;
}

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    const std::string value = argv[i + 1];
    if (option == "--epochs") {
      settings.epochs = std::stoll(value);
    } else if (option == "--fine-tune-epochs") {
      settings.fine_tune_epochs = std::stoll(value);
    } else if (option == "--data") {
      settings.data = value;
    } else if (option == "--out") {
      settings.out = value;
    } else {
      throw InvalidArgument("model_optimization: unknown option " + option +
                            " (--epochs, --fine-tune-epochs, --data, --out)");
    }
  }
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Settings settings = parse(argc, argv);
    std::filesystem::create_directories(settings.out);
    const data::ImageClassificationData data = data::load_fashion_mnist(settings.data);
    std::vector<Row> rows;

    manual_seed(1);
    nn::Model baseline = nn::zoo::build("cnn", {28, 28, 1}, 10);
    compile(baseline, 1e-3);
    baseline.fit(data.train_images, data.train_labels,
                 {.batch_size = settings.batch, .epochs = static_cast<int>(settings.epochs)});
    const std::string baseline_dir = settings.out + "/fp32";
    baseline.save(baseline_dir);
    rows.push_back(measure("fp32", baseline, data, float_weight_bytes(baseline), settings));

    {
      // The control: as many more epochs in fp32 as the pruned and QAT models get, at their rate.
      nn::Model model = io::load_model(baseline_dir);
      compile(model, 1e-4);
      model.fit(
          data.train_images, data.train_labels,
          {.batch_size = settings.batch, .epochs = static_cast<int>(settings.fine_tune_epochs)});
      rows.push_back(measure("fp32 fine-tuned", model, data, float_weight_bytes(model), settings));
    }
    const std::int64_t fine_tune_steps =
        settings.fine_tune_epochs *
        ((data.train_images.dim(0) + settings.batch - 1) / settings.batch);
    const std::vector<std::pair<std::string, pruning::PruneOptions>> prunings{
        {"pruned 50%", {.schedule = pruning::ConstantSparsity{.target_sparsity = 0.5}}},
        {"pruned 80%",
         {.schedule = pruning::PolynomialDecay{.initial_sparsity = 0.5,
                                               .final_sparsity = 0.8,
                                               .end_step = fine_tune_steps * 3 / 4}}},
        {"2:4", {.pattern = pruning::Pattern::two_of_four}}};
    for (const auto& [name, options] : prunings) {
      nn::Model model = io::load_model(baseline_dir);
      compile(model, 1e-4);
      auto pruned = pruning::prune_low_magnitude(model, options);
      model.fit(data.train_images, data.train_labels,
                {.batch_size = settings.batch,
                 .epochs = static_cast<int>(settings.fine_tune_epochs),
                 .callbacks = {pruned}});
      pruning::strip_pruning(*pruned);
      rows.push_back(measure(name, model, data, float_weight_bytes(model), settings));
    }

    // Calibration: 1,024 training images, as TensorRT's guide suggests 500 to 1,000.
    data::TensorDataset calibration(slice(data.train_images, {0, 0, 0, 0}, {1024, 28, 28, 1}),
                                    slice(data.train_labels, {0}, {1024}));
    calibration.batch(128);
    for (const quantization::Calibrator calibrator :
         {quantization::Calibrator::min_max, quantization::Calibrator::percentile,
          quantization::Calibrator::entropy}) {
      nn::Model model = io::load_model(baseline_dir);
      compile(model, 1e-4);
      quantization::quantize_model(model, calibration, {.calibrator = calibrator});
      rows.push_back(measure(std::string("int8 PTQ ") + quantization::calibrator_name(calibrator),
                             model, data, quantization::int8_weight_bytes(model), settings));
    }
    {
      nn::Model model = io::load_model(baseline_dir);
      compile(model, 1e-4);
      quantization::quantize_model(model, calibration);
      model.fit(
          data.train_images, data.train_labels,
          {.batch_size = settings.batch, .epochs = static_cast<int>(settings.fine_tune_epochs)});
      rows.push_back(
          measure("int8 QAT", model, data, quantization::int8_weight_bytes(model), settings));
    }

    std::printf(
        "\n| model | test accuracy | vs fp32 | kernel sparsity | weights | gzip -9 |\n"
        "|---|---|---|---|---|---|\n");
    for (const Row& row : rows) {
      std::printf("| %s | %.2f%% | %+.2f | %.0f%% | %.0f KiB | %.0f KiB |\n", row.name.c_str(),
                  100 * row.accuracy, 100 * (row.accuracy - rows.front().accuracy),
                  100 * row.sparsity, static_cast<double>(row.raw_bytes) / 1024,
                  static_cast<double>(row.gzip_bytes) / 1024);
    }
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "model_optimization: %s\n", error.what());
    return 1;
  }
}
