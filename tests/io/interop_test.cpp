// Tandem's files in the tools other people use, through tests/io/interop_check.py in the project
// virtualenv (scripts/python-env.sh interop: safetensors, onnxruntime, numpy, pinned): the
// `safetensors` package reads checkpoints with the same values, onnxruntime runs ONNX exports
// within 1e-5 of Tandem (and QDQ exports of quantised models within one quantisation step),
// TensorFlow serves SavedModel exports and Keras loads .keras exports within 1e-5, and weights
// PyTorch or Keras (.keras, .h5) wrote load into the matching Tandem model. Skipped, with the
// reason, where the package index cannot be reached.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "core/tensor_copy.h"
#include "io/io_support.h"
#include "support/python_env.h"

namespace tandem {
namespace {

using testing::ScratchDir;
using testing::shell_quote;

// Exports run by other tools agree with Tandem to this, absolutely (f32).
constexpr double kExportTolerance = 1e-5;

testing::ShellResult run_check(const std::string& python, const std::vector<std::string>& args) {
  std::string command = shell_quote(python) + " " +
                        shell_quote(std::string(TANDEM_SOURCE_DIR) + "/tests/io/interop_check.py");
  for (const std::string& arg : args)
    command += " " + shell_quote(arg);
  return testing::run_capturing(command + " 2>&1");
}

// What the Python side must find: dtype (numpy's name), shape and the bytes in hex.
void write_expected(const io::Safetensors& file, const std::string& path) {
  nlohmann::json expected = nlohmann::json::object();
  for (const auto& [name, tensor] : file.tensors) {
    static const char kHex[] = "0123456789abcdef";
    std::string hex;
    const auto* bytes = static_cast<const unsigned char*>(tensor.raw_data());
    for (std::size_t i = 0; i < tensor.nbytes(); ++i) {
      hex += kHex[bytes[i] >> 4];
      hex += kHex[bytes[i] & 15];
    }
    const std::map<DType, std::string> numpy_names{{DType::f32, "float32"}, {DType::f64, "float64"},
                                                   {DType::f16, "float16"}, {DType::i32, "int32"},
                                                   {DType::i64, "int64"},   {DType::u8, "uint8"},
                                                   {DType::boolean, "bool"}};
    expected[name] = {
        {"dtype", numpy_names.at(tensor.dtype())}, {"shape", tensor.shape()}, {"hex", hex}};
  }
  std::ofstream(path) << expected.dump();
}

TEST(Interop, TheSafetensorsPackageReadsCheckpointsWithTheSameValues) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  model.fit(*testing::small_dataset(), {.epochs = 1});
  {
    io::CheckpointManager manager(scratch.path().string(), {.async = false});
    manager.save(model, {1, 0, 12}, {}, 12, 1);
  }
  io::save_safetensors(scratch.file("dtypes.safetensors"),
                       {{"f64", Tensor::from_vector<double>({0.1, -2.5}, {2})},
                        {"f16", cast(Tensor::from_vector<float>({0.5f, -1.0f}, {2}), DType::f16)},
                        {"i32", Tensor::from_vector<std::int32_t>({7, -8}, {1, 2})},
                        {"i64", Tensor::from_vector<std::int64_t>({1LL << 40}, {1})},
                        {"u8", Tensor::from_vector<std::uint8_t>({0, 200}, {2})},
                        {"bool", Tensor::from_vector<bool>({true, false}, {2})},
                        {"scalar", Tensor::scalar(3.0)}});
  for (const std::string& file : {scratch.file("ckpt-0000000012/model.safetensors"),
                                  scratch.file("ckpt-0000000012/optimizer.safetensors"),
                                  scratch.file("dtypes.safetensors")}) {
    write_expected(io::load_safetensors(file), scratch.file("expected.json"));
    const testing::ShellResult run =
        run_check(env.python, {"safetensors", file, scratch.file("expected.json")});
    EXPECT_EQ(run.status, 0) << run.output;
    std::cout << run.output;
  }
}

// A model of the zoo's kinds with every layer ONNX export covers: strided and dilated "same"
// convolutions, GELU, average and max pooling, batch norm (of images and of features), a residual
// Add, Dropout, softmax.
nn::Model every_layer_model() {
  nn::clear_session();
  manual_seed(12);
  const nn::SymbolicTensor inputs = nn::Input({12, 12, 3});
  nn::SymbolicTensor x = nn::Conv2D(
      8, 3, nn::Conv2DConfig{.strides = 2, .padding = "same", .activation = "gelu"})(inputs);
  x = nn::BatchNormalization()(x);
  nn::SymbolicTensor y = nn::Conv2D(
      8, 3, nn::Conv2DConfig{.padding = "same", .dilation_rate = 2, .activation = "sigmoid"})(x);
  x = nn::Activation("tanh")(nn::Add()({x, y}));
  x = nn::AveragePooling2D(3, 2, "same")(x);
  const nn::SymbolicTensor pooled = nn::GlobalAveragePooling2D()(nn::MaxPool2D(2, 1)(x));
  x = nn::Dense(6, "relu")(nn::Flatten()(x));
  x = nn::Dropout(0.5)(nn::BatchNormalization()(x));
  x = nn::Activation("softmax")(nn::Dense(5)(x));
  const nn::SymbolicTensor outputs = nn::Add()({x, nn::Dense(5)(pooled)});
  return nn::Model(inputs, outputs, "every_layer");
}

// Every activation Keras takes by name, one Dense branch each, summed: the exporters translate
// each (and Keras, ONNX Runtime and TensorFlow compute it as Tandem does).
nn::Model activations_model() {
  nn::clear_session();
  manual_seed(13);
  const nn::SymbolicTensor inputs = nn::Input({6});
  std::vector<nn::SymbolicTensor> branches;
  for (const char* activation : {"elu", "selu", "softplus", "softsign", "swish", "exponential",
                                 "hard_sigmoid", "mish", "relu6", "leaky_relu", "gelu"}) {
    // Glorot weights over inputs in [0, 1): values on both sides of every activation's bend.
    branches.push_back(nn::Dense(4, activation)(nn::Dense(6)(inputs)));
  }
  return nn::Model(inputs, nn::Add()(branches), "activations");
}

// The models the exporters are checked on: the zoo's, one with trained batch norm statistics (not
// the initial zeros and ones), every_layer_model and activations_model.
std::vector<std::pair<std::string, nn::Model>> export_models() {
  std::vector<std::pair<std::string, nn::Model>> models;
  for (const std::string name : {"cnn", "mlp", "resnet_small"}) {
    manual_seed(21);
    models.emplace_back(name, nn::zoo::build(name, {28, 28, 1}, 10));
  }
  nn::Model trained = testing::small_model();
  trained.fit(*testing::small_dataset(), {.epochs = 2});
  models.emplace_back("small_trained", std::move(trained));
  models.emplace_back("every_layer", every_layer_model());
  models.emplace_back("activations", activations_model());
  return models;
}

// Writes a batch of random inputs and the model's predictions as `path` ("input", "output").
void save_predictions(nn::Model& model, std::int64_t batch_size, const std::string& path) {
  Generator generator(31);
  Shape batch{batch_size};
  batch.insert(batch.end(), model.input_shape().begin() + 1, model.input_shape().end());
  const Tensor x = random_uniform(batch, 0.0, 1.0, DType::f32, generator);
  io::save_safetensors(path, {{"input", x}, {"output", model.predict(x)}});
}

// Each of export_models() written by `write` to scratch/<name><suffix>, and interop_check.py's
// `mode` comparing what the file predicts with Tandem's predictions, within kExportTolerance.
void check_exports(const std::string& python, const std::string& mode, const std::string& suffix,
                   const std::function<void(nn::Model&, const std::string& name,
                                            const std::string& path)>& write) {
  ScratchDir scratch;
  for (auto& [name, model] : export_models()) {
    SCOPED_TRACE(name);
    const std::string path = scratch.file(name + suffix);
    write(model, name, path);
    save_predictions(model, 7, scratch.file(name + ".data"));
    const testing::ShellResult run = run_check(
        python, {mode, path, scratch.file(name + ".data"), std::to_string(kExportTolerance)});
    EXPECT_EQ(run.status, 0) << run.output;
    std::cout << run.output;
  }
}

TEST(Interop, OnnxRuntimeMatchesTandemWithinTolerance) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  check_exports(env.python, "onnx", ".onnx",
                [](nn::Model& model, const std::string& name, const std::string& path) {
                  io::export_onnx(model, path, {.opset = name == "every_layer" ? 17 : 13});
                });
}

// Weight-only f16 and bf16 exports against Tandem computing with the same rounded weights.
TEST(Interop, OnnxRuntimeRunsSixteenBitWeightExportsAsTandemDoes) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  for (const DType weight_dtype : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(dtype_name(weight_dtype));
    check_exports(env.python, "onnx", ".onnx",
                  [weight_dtype](nn::Model& model, const std::string&, const std::string& path) {
                    io::export_onnx(model, path, {.weight_dtype = weight_dtype});
                    // The model itself from here on computes with the weights as stored.
                    for (const Tensor& weight : model.weights()) {
                      tandem::detail::copy_into(
                          weight, cast(cast(weight, weight_dtype), DType::f32), "rounding");
                    }
                  });
  }
}

// Quantised models (calibrated on inputs like the test's) in QDQ form: onnxruntime against
// Tandem's int8 simulation, within one quantisation step.
TEST(Interop, OnnxRuntimeRunsQuantisedModelsInQdqFormAsTandemDoes) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  ScratchDir scratch;
  for (auto& [name, model] : export_models()) {
    if (name == "every_layer") continue;
    SCOPED_TRACE(name);
    Generator generator(33);
    Shape batch{64};
    batch.insert(batch.end(), model.input_shape().begin() + 1, model.input_shape().end());
    data::TensorDataset calibration(random_uniform(batch, 0.0, 1.0, DType::f32, generator),
                                    Tensor::zeros({64}, DType::i32));
    calibration.batch(16);
    const auto quantized = quantization::quantize_model(model, calibration);
    const std::string onnx = scratch.file(name + "_int8.onnx");
    io::export_onnx(model, onnx);
    save_predictions(model, 7, scratch.file(name + ".data"));
    // One quantisation step of the last quantised layer's input, through its largest weight:
    // what a rounding decided the other way there moves an output by.
    const quantization::InputQuantization& last = quantized->inputs().back();
    const double step =
        last.scale * reduce_max(abs(model.get_layer(last.layer).weights().front())).item();
    const testing::ShellResult run =
        run_check(env.python, {"onnx", onnx, scratch.file(name + ".data"), std::to_string(step)});
    EXPECT_EQ(run.status, 0) << run.output;
    std::cout << run.output;
  }
}

TEST(Interop, TensorFlowServesTheSavedModelWithTandemsPredictions) {
  // TensorFlow comes with the tfrecord group; both groups share the project virtualenv.
  TANDEM_REQUIRE_PYTHON_ENV(tf_env, "tfrecord");
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  check_exports(env.python, "savedmodel", "_savedmodel",
                [](nn::Model& model, const std::string&, const std::string& path) {
                  io::export_saved_model(model, path);
                });
}

TEST(Interop, KerasLoadsTheKerasExportWithTandemsPredictions) {
  TANDEM_REQUIRE_PYTHON_ENV(tf_env, "tfrecord");
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  check_exports(env.python, "keras-load", ".keras",
                [](nn::Model& model, const std::string&, const std::string& path) {
                  io::export_keras(model, path);
                });
}

TEST(Interop, WeightsKerasWroteLoadIntoTheMatchingTandemModel) {
  TANDEM_REQUIRE_PYTHON_ENV(tf_env, "tfrecord");
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  ScratchDir scratch;
  const testing::ShellResult run = run_check(
      env.python,
      {"keras-write", scratch.file("cnn.keras"), scratch.file("cnn.h5"), scratch.file("cnn.data")});
  ASSERT_EQ(run.status, 0) << run.output;
  std::cout << run.output;
  const io::Safetensors expected = io::load_safetensors(scratch.file("cnn.data"));
  for (const std::string file : {"cnn.keras", "cnn.h5"}) {
    SCOPED_TRACE(file);
    nn::clear_session();
    nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
    io::load_keras_weights(model, scratch.file(file));
    const double difference =
        reduce_max(abs(model.predict(*expected.find("input")) - *expected.find("output"))).item();
    EXPECT_LE(difference, kExportTolerance);
    std::cout << file << ": Tandem with Keras' weights: max |difference| " << difference << "\n";
  }
}

TEST(Interop, KerasModelsWithEveryActivationPredictAsKerasDoes) {
  TANDEM_REQUIRE_PYTHON_ENV(tf_env, "tfrecord");
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  ScratchDir scratch;
  const testing::ShellResult run = run_check(
      env.python, {"keras-activations", scratch.file("act.keras"), scratch.file("act.data")});
  ASSERT_EQ(run.status, 0) << run.output;
  std::cout << run.output;
  const io::Safetensors expected = io::load_safetensors(scratch.file("act.data"));
  nn::clear_session();
  io::KerasModel keras = io::load_keras_model(scratch.file("act.keras"));
  io::load_keras_weights(keras.model, scratch.file("act.keras"));
  const Tensor want = *expected.find("output");
  const Tensor got = keras.model.predict(*expected.find("input"));
  const double scale = reduce_max(abs(want)).item();
  const double difference = reduce_max(abs(got - want)).item();
  EXPECT_LE(difference, 1e-5 * std::max(1.0, scale)) << "largest output " << scale;
  std::cout << "Tandem with Keras' activations: max |difference| " << difference
            << " (largest output " << scale << ")\n";
}

TEST(Interop, WeightsPyTorchWroteLoadIntoTheMatchingTandemModel) {
  // PyTorch comes with the bench group (pinned there for the benchmark peers); both groups
  // share the project virtualenv.
  TANDEM_REQUIRE_PYTHON_ENV(torch_env, "bench");
  TANDEM_REQUIRE_PYTHON_ENV(env, "interop");
  ScratchDir scratch;
  for (const std::string arch : {"mlp", "cnn"}) {
    SCOPED_TRACE(arch);
    const std::string weights = scratch.file(arch + ".safetensors");
    const std::string data = scratch.file(arch + ".data");
    const testing::ShellResult run = run_check(env.python, {"torch", arch, weights, data});
    if (run.status == 3) GTEST_SKIP() << "SKIPPED: " << run.output;
    ASSERT_EQ(run.status, 0) << run.output;
    std::cout << run.output;
    nn::Model model = nn::zoo::build(arch, {28, 28, 1}, 10);
    io::import_torch_weights(model, weights);
    const io::Safetensors expected = io::load_safetensors(data);
    const Tensor predicted = model.predict(*expected.find("input"));
    const double difference = reduce_max(abs(predicted - *expected.find("output"))).item();
    EXPECT_LE(difference, 1e-5) << "Tandem vs PyTorch outputs";
    std::cout << arch << ": Tandem with PyTorch's weights: max |difference| " << difference << "\n";
  }
}

}  // namespace
}  // namespace tandem
