// Inference speed of a zoo model in Tandem, four ways: Model::predict (eager, no tape), predict
// of the model with its batch norms folded (nn::fold_batch_norms), and the inference path of
// `tandem predict` (InferenceModel, tandem/inference.h) on the model, folded and compiled (one
// planned graph, ReLUs and residual adds fused into the convolutions as oneDNN post-ops) and
// quantised to int8 (post-training, min-max calibration on 64 random images: the integer kernels);
// and the files onnxruntime needs to run the same models on the same inputs: the f32 model and
// the int8 one (QDQ form) exported to ONNX, and the input batches with Tandem's outputs.
// bench/inference_vs_onnxruntime.py runs both sides, same threads, and prints the comparison.
//
//   build/bench/inference --out DIR [--model resnet50] [--image-size 112] [--batch 8]
//                         [--threads 2] [--repeats 30]
// Prints one JSON object: per way, Tandem's batch-1 latency percentiles (ms) and batch-B
// throughput (images/s, median and spread of the repeats).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tandem/bench.h"
#include "tandem/tandem.h"

using namespace tandem;

namespace {

struct Settings {
  std::string model = "resnet50";
  std::int64_t image_size = 112;
  std::int64_t batch = 8;
  int threads = 2;
  int repeats = 30;
  std::string out;
};

// One way's figures as a JSON member.
std::string figures(const std::string& way, const std::function<Tensor(const Tensor&)>& predict,
                    const Tensor& one, const Tensor& batch, int repeats) {
  // Two untimed calls first; each result is read, as a server would.
  const auto calls = [&](const Tensor& x) {
    return bench::time_calls([&] { (void)predict(x).to_vector<float>(); }, 2, repeats);
  };
  const std::vector<double> latency = calls(one);
  std::vector<double> throughput;
  for (const double seconds : calls(batch))
    throughput.push_back(static_cast<double>(batch.dim(0)) / seconds);
  char text[512];
  std::snprintf(text, sizeof text,
                "\"%s\": {\"latency_ms\": {\"p50\": %.3f, \"p90\": %.3f, \"p99\": %.3f}, "
                "\"images_per_sec\": {\"median\": %.1f, \"min\": %.1f, \"max\": %.1f}}",
                way.c_str(), 1e3 * bench::quantile(latency, 0.50),
                1e3 * bench::quantile(latency, 0.90), 1e3 * bench::quantile(latency, 0.99),
                bench::quantile(throughput, 0.50),
                *std::min_element(throughput.begin(), throughput.end()),
                *std::max_element(throughput.begin(), throughput.end()));
  return text;
}

Settings parse(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i];
    const std::string value = argv[i + 1];
    if (option == "--model") {
      settings.model = value;
    } else if (option == "--image-size") {
      settings.image_size = std::stoll(value);
    } else if (option == "--batch") {
      settings.batch = std::stoll(value);
    } else if (option == "--threads") {
      settings.threads = std::stoi(value);
    } else if (option == "--repeats") {
      settings.repeats = std::stoi(value);
    } else if (option == "--out") {
      settings.out = value;
    } else {
      throw InvalidArgument("inference: unknown option " + option +
                            " (--model, --image-size, --batch, --threads, --repeats, --out)");
    }
  }
  if (settings.out.empty()) throw InvalidArgument("inference: --out DIR is required");
  return settings;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Settings settings = parse(argc, argv);
    set_num_threads(settings.threads);
    std::filesystem::create_directories(settings.out);
    manual_seed(1);
    const std::int64_t side = settings.model == "resnet50" ? settings.image_size : 28;
    const std::int64_t channels = settings.model == "resnet50" ? 3 : 1;
    nn::Model model = nn::zoo::build(settings.model, {side, side, channels}, 10);
    io::export_onnx(model, settings.out + "/model.onnx");
    Generator generator(2);
    const Tensor one = random_uniform({1, side, side, channels}, 0.0, 1.0, DType::f32, generator);
    const Tensor batch =
        random_uniform({settings.batch, side, side, channels}, 0.0, 1.0, DType::f32, generator);
    io::save_safetensors(settings.out + "/inputs.safetensors",
                         {{"one", one},
                          {"batch", batch},
                          {"one_output", model.predict(one)},
                          {"batch_output", model.predict(batch, settings.batch)}});

    InferenceModel compiled(model);
    nn::Model& folded = compiled.model();
    const NoGradGuard no_grad;
    std::string ways =
        figures(
            "tandem eager", [&](const Tensor& x) { return model.predict(x, x.dim(0)); }, one, batch,
            settings.repeats) +
        ", " +
        figures(
            "tandem folded", [&](const Tensor& x) { return folded.predict(x, x.dim(0)); }, one,
            batch, settings.repeats) +
        ", " +
        figures(
            "tandem folded compiled",
            [&](const Tensor& x) { return compiled.predict(x, x.dim(0)); }, one, batch,
            settings.repeats);

    data::TensorDataset calibration(
        random_uniform({64, side, side, channels}, 0.0, 1.0, DType::f32, generator),
        Tensor::zeros({64}, DType::i32));
    calibration.batch(16);
    quantization::quantize_model(model, calibration);
    io::export_onnx(model, settings.out + "/model_int8.onnx");
    InferenceModel integer(model);
    io::save_safetensors(settings.out + "/int8_outputs.safetensors",
                         {{"one_output", integer.predict(one, 1)},
                          {"batch_output", integer.predict(batch, settings.batch)}});
    ways += ", " + figures(
                       "tandem int8 compiled",
                       [&](const Tensor& x) { return integer.predict(x, x.dim(0)); }, one, batch,
                       settings.repeats);
    std::printf(
        "{\"model\": \"%s\", \"image_size\": %lld, \"batch\": %lld, \"threads\": %d, "
        "\"repeats\": %d, \"weights\": %lld, \"ways\": {%s}}\n",
        settings.model.c_str(), static_cast<long long>(side),
        static_cast<long long>(settings.batch), settings.threads, settings.repeats,
        static_cast<long long>(model.count_params()), ways.c_str());
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "inference: %s\n", error.what());
    return 1;
  }
}
