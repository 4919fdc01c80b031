// Keras model descriptions (io::load_keras_model) in the form Keras 2.15 writes them: a
// Sequential CNN and a Functional model with a residual branch and a shared layer build with
// Keras' weight counts and names; a .keras (zip) file is read through its config.json; every
// unsupported layer, argument and shape is an error naming the file, the layer and the argument.
// (tests/cli/keras_model_test.cpp trains descriptions that TensorFlow itself wrote.)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/io_support.h"
#include "io/zip.h"
#include "support/errors.h"

namespace tandem {
namespace {

using nlohmann::json;
using testing::error_of;
using testing::ScratchDir;

json initializer(const std::string& class_name) {
  return {
      {"module", "keras.initializers"},
      {"class_name", class_name},
      {"config", class_name == "GlorotUniform" || class_name == "HeNormal" ? json{{"seed", nullptr}}
                                                                           : json::object()},
      {"registered_name", nullptr}};
}

json layer(const std::string& class_name, const std::string& name, json config) {
  config["name"] = name;
  config["trainable"] = true;
  config["dtype"] = "float32";
  return {{"module", "keras.layers"},
          {"class_name", class_name},
          {"config", config},
          {"registered_name", nullptr}};
}

// What Dense and Conv2D share: activation, bias, initialisers, no regularizers or constraints.
json kernel_layer(const std::string& class_name, const std::string& name, json config,
                  const std::string& activation) {
  config.update({{"activation", activation},
                 {"use_bias", true},
                 {"kernel_initializer", initializer("GlorotUniform")},
                 {"bias_initializer", initializer("Zeros")},
                 {"kernel_regularizer", nullptr},
                 {"bias_regularizer", nullptr},
                 {"activity_regularizer", nullptr},
                 {"kernel_constraint", nullptr},
                 {"bias_constraint", nullptr}});
  return layer(class_name, name, std::move(config));
}

json conv2d(const std::string& name, int filters, const std::string& activation,
            const std::string& padding = "valid") {
  return kernel_layer("Conv2D", name,
                      {{"filters", filters},
                       {"kernel_size", {3, 3}},
                       {"strides", {1, 1}},
                       {"padding", padding},
                       {"data_format", "channels_last"},
                       {"dilation_rate", {1, 1}},
                       {"groups", 1}},
                      activation);
}

json dense(const std::string& name, int units, const std::string& activation) {
  return kernel_layer("Dense", name, {{"units", units}}, activation);
}

json input_layer(const std::string& name) {
  return {{"module", "keras.layers"},
          {"class_name", "InputLayer"},
          {"config",
           {{"batch_input_shape", {nullptr, 28, 28, 1}},
            {"dtype", "float32"},
            {"sparse", false},
            {"ragged", false},
            {"name", name}}},
          {"registered_name", nullptr}};
}

// TensorFlow's CNN tutorial as keras.Sequential([...]).to_json() writes it.
json sequential_cnn() {
  return {
      {"class_name", "Sequential"},
      {"config",
       {{"name", "sequential"},
        {"layers",
         {input_layer("input_1"), conv2d("conv2d", 32, "relu"),
          layer("MaxPooling2D", "max_pooling2d",
                {{"pool_size", {2, 2}},
                 {"padding", "valid"},
                 {"strides", {2, 2}},
                 {"data_format", "channels_last"}}),
          conv2d("conv2d_1", 64, "relu"),
          layer("Flatten", "flatten", {{"data_format", "channels_last"}}),
          layer("Dropout", "dropout", {{"rate", 0.2}, {"noise_shape", nullptr}, {"seed", nullptr}}),
          dense("dense", 10, "softmax")}}}},
      {"keras_version", "2.15.0"},
      {"backend", "tensorflow"}};
}

json node(std::initializer_list<std::string> inputs) {
  json references = json::array();
  for (const std::string& input : inputs)
    references.push_back({input, 0, 0, json::object()});
  return json::array({references});
}

// x -> conv -> BN -> relu; y = conv(conv(x)); add(x, y) -> GAP -> dense, as keras.Model writes.
json functional_residual() {
  json layers = json::array();
  const auto add_layer = [&](json entry, json inbound) {
    entry["name"] = entry["config"]["name"];
    entry["inbound_nodes"] = std::move(inbound);
    layers.push_back(std::move(entry));
  };
  add_layer(input_layer("input_2"), json::array());
  add_layer(conv2d("stem", 8, "linear", "same"), node({"input_2"}));
  add_layer(layer("BatchNormalization", "bn",
                  {{"axis", {3}},
                   {"momentum", 0.99},
                   {"epsilon", 0.001},
                   {"center", true},
                   {"scale", true},
                   {"beta_initializer", initializer("Zeros")},
                   {"gamma_initializer", initializer("Ones")},
                   {"moving_mean_initializer", initializer("Zeros")},
                   {"moving_variance_initializer", initializer("Ones")},
                   {"beta_regularizer", nullptr},
                   {"gamma_regularizer", nullptr},
                   {"beta_constraint", nullptr},
                   {"gamma_constraint", nullptr}}),
            node({"stem"}));
  add_layer(
      layer("ReLU", "re_lu", {{"max_value", nullptr}, {"negative_slope", 0.0}, {"threshold", 0.0}}),
      node({"bn"}));
  add_layer(conv2d("branch_a", 8, "relu", "same"), node({"re_lu"}));
  add_layer(conv2d("branch_b", 8, "linear", "same"), node({"branch_a"}));
  add_layer(layer("Add", "add", json::object()), node({"re_lu", "branch_b"}));
  add_layer(layer("GlobalAveragePooling2D", "gap",
                  {{"data_format", "channels_last"}, {"keepdims", false}}),
            node({"add"}));
  add_layer(dense("logits", 10, "linear"), node({"gap"}));
  return {{"class_name", "Functional"},
          {"config",
           {{"name", "residual"},
            {"trainable", true},
            {"layers", layers},
            {"input_layers", {{"input_2", 0, 0}}},
            {"output_layers", {{"logits", 0, 0}}}}},
          {"keras_version", "2.15.0"},
          {"backend", "tensorflow"}};
}

std::string write_json(const ScratchDir& scratch, const std::string& name, const json& model) {
  const std::string path = scratch.file(name);
  std::ofstream(path) << model.dump(1);
  return path;
}

std::vector<std::string> weight_names(const nn::Model& model) {
  std::vector<std::string> names;
  for (const Tensor& weight : model.weights())
    names.push_back(weight.name());
  return names;
}

TEST(KerasModel, ASequentialCnnHasKerasWeightsAndEndsInASoftmax) {
  ScratchDir scratch;
  const io::KerasModel keras =
      io::load_keras_model(write_json(scratch, "cnn.json", sequential_cnn()));
  EXPECT_EQ(keras.class_name, "Sequential");
  EXPECT_TRUE(keras.outputs_probabilities);
  EXPECT_EQ(keras.model.name(), "sequential");
  // Keras: 320 + 18,496 + (11 * 11 * 64 + 1) * 10 = 96,266.
  EXPECT_EQ(keras.model.count_params(), 320 + 18496 + (11 * 11 * 64 + 1) * 10);
  EXPECT_EQ(keras.model.input_shape(), (Shape{-1, 28, 28, 1}));
  EXPECT_EQ(keras.model.output_shape(), (Shape{-1, 10}));
  EXPECT_EQ(weight_names(keras.model),
            (std::vector<std::string>{"conv2d/kernel", "conv2d/bias", "conv2d_1/kernel",
                                      "conv2d_1/bias", "dense/kernel", "dense/bias"}));
}

// Files that describe what cannot be: a layer too large for the memory (10^12 units) names the
// file, the layer and its weight; two layers of one name are refused at load, as Keras refuses
// them; a number past a double's range (1e400) and a legacy .h5 file are named for what they are.
TEST(KerasModel, ImpossibleModelsAreNamedByFileAndLayer) {
  ScratchDir scratch;
  json huge = sequential_cnn();
  huge["config"]["layers"].back() = dense("huge", 0, "softmax");
  huge["config"]["layers"].back()["config"]["units"] = 1'000'000'000'000;
  const std::string huge_path = write_json(scratch, "huge.json", huge);
  try {
    io::load_keras_model(huge_path);
    ADD_FAILURE() << "a layer of 10^12 units loaded";
  } catch (const OutOfMemory& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(huge_path + ": Dense 'huge': its weight 'kernel' (7744, 1000000000000)"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("make the layer smaller"), std::string::npos) << message;
  }
  json twice = sequential_cnn();
  twice["config"]["layers"][3]["config"]["name"] = "conv2d";  // the second Conv2D as the first
  const std::string twice_path = write_json(scratch, "twice.json", twice);
  EXPECT_NE(error_of([&] {
              io::load_keras_model(twice_path);
            }).find(twice_path + ": two layers are named 'conv2d'; layer names must be unique"),
            std::string::npos);
  const std::string overflow_path = scratch.file("overflow.json");
  std::ofstream(overflow_path) << R"({"class_name": "Sequential", "config": {"layers": [
      {"class_name": "Dense", "config": {"name": "d", "units": 1e400}}]}})";
  EXPECT_NE(error_of<IoError>([&] {
              io::load_keras_model(overflow_path);
            }).find(overflow_path + ": not JSON ("),
            std::string::npos);
  const std::string h5 = scratch.file("legacy.h5");
  std::ofstream(h5) << std::string("\x89HDF\r\n\x1a\n", 8) << std::string(100, '\0');
  EXPECT_NE(error_of<IoError>([&] { io::load_keras_model(h5); })
                .find("an HDF5 file (Keras' legacy .h5 model format), not a model description; "
                      "save it as a .keras file"),
            std::string::npos);
}

// A .keras file whose config.json declares gigabytes is refused before anything is inflated.
TEST(KerasModel, AConfigThatWouldInflateToGigabytesIsRefused) {
  ScratchDir scratch;
  std::vector<std::uint8_t> archive =
      io::detail::zip_archive({{"config.json", sequential_cnn().dump()}});
  // The central directory's entry (signature 50 4B 01 02): its uncompressed size, 3 GiB.
  const std::array<std::uint8_t, 4> signature{0x50, 0x4B, 0x01, 0x02};
  const auto entry =
      std::search(archive.begin(), archive.end(), signature.begin(), signature.end());
  ASSERT_NE(entry, archive.end());
  const std::size_t at = static_cast<std::size_t>(entry - archive.begin()) + 24;
  archive[at] = 0x00;
  archive[at + 1] = 0x00;
  archive[at + 2] = 0x00;
  archive[at + 3] = 0xC0;
  const std::string path = scratch.file("bomb.keras");
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(archive.data()),
             static_cast<std::streamsize>(archive.size()));
  EXPECT_NE(error_of<IoError>([&] { io::load_keras_model(path); })
                .find(path + ": member config.json declares 3221225472 bytes uncompressed, more "
                             "than the 67108864 it may hold"),
            std::string::npos);
}

TEST(KerasModel, AFunctionalModelKeepsItsResidualBranch) {
  ScratchDir scratch;
  io::KerasModel keras =
      io::load_keras_model(write_json(scratch, "residual.json", functional_residual()));
  EXPECT_EQ(keras.class_name, "Functional");
  EXPECT_FALSE(keras.outputs_probabilities);
  // stem 80 + BN 32 + two branch convolutions 584 each + dense 90: Keras' count, the moving
  // statistics included.
  EXPECT_EQ(keras.model.count_params(), 80 + 32 + 584 + 584 + 90);
  const std::string summary = keras.model.summary_string();
  EXPECT_NE(summary.find("re_lu"), std::string::npos) << summary;
  // The branch is really added: zeroing it changes the output.
  Generator generator(5);
  const Tensor x = random_uniform({2, 28, 28, 1}, 0.0, 1.0, DType::f32, generator);
  const std::vector<float> with_branch = keras.model.predict(x).to_vector<float>();
  for (Tensor& weight : keras.model.get_layer("branch_b").impl().weights())
    weight.set_data(Tensor::zeros(weight.shape()));
  EXPECT_NE(keras.model.predict(x).to_vector<float>(), with_branch);
}

TEST(KerasModel, AReluCappedAtSixIsRelu6AndOtherCapsAreNamed) {
  ScratchDir scratch;
  const auto with_cap = [&](const json& cap) {
    json model = functional_residual();
    for (json& entry : model["config"]["layers"]) {
      if (entry["class_name"] == "ReLU") entry["config"]["max_value"] = cap;
    }
    return write_json(scratch, "capped.json", model);
  };
  io::KerasModel keras = io::load_keras_model(with_cap(6.0));
  const nn::LayerConfig config = *keras.model.get_layer("re_lu").impl().config();
  EXPECT_EQ(std::get<std::string>(config.at("activation")), "relu6");
  const std::string message = error_of([&] { io::load_keras_model(with_cap(4.0)); });
  EXPECT_NE(message.find("layer 're_lu' (ReLU): argument max_value=4.0 is not supported; Tandem's "
                         "ReLU caps at 6 (relu6) or not at all"),
            std::string::npos)
      << message;
}

// A .keras file is a zip archive; its config.json is the description (stored, as Keras writes
// it).
TEST(KerasModel, ReadsTheConfigInsideADotKerasFile) {
  ScratchDir scratch;
  const std::string config = sequential_cnn().dump();
  const std::string metadata = R"({"keras_version": "2.15.0"})";
  std::string zip;
  std::string directory;
  const auto put16 = [](std::string& out, std::uint32_t value) {
    out.push_back(static_cast<char>(value & 0xFF));
    out.push_back(static_cast<char>((value >> 8) & 0xFF));
  };
  const auto put32 = [&](std::string& out, std::uint32_t value) {
    put16(out, value & 0xFFFF);
    put16(out, value >> 16);
  };
  std::uint32_t entries = 0;
  for (const auto& [name, text] : {std::pair{std::string("metadata.json"), metadata},
                                   std::pair{std::string("config.json"), config}}) {
    const auto offset = static_cast<std::uint32_t>(zip.size());
    const auto size = static_cast<std::uint32_t>(text.size());
    put32(zip, 0x04034b50);
    put16(zip, 20), put16(zip, 0), put16(zip, 0), put16(zip, 0), put16(zip, 0);
    put32(zip, 0), put32(zip, size), put32(zip, size);
    put16(zip, static_cast<std::uint32_t>(name.size())), put16(zip, 0);
    zip += name + text;
    put32(directory, 0x02014b50);
    put16(directory, 20), put16(directory, 20), put16(directory, 0), put16(directory, 0);
    put16(directory, 0), put16(directory, 0);
    put32(directory, 0), put32(directory, size), put32(directory, size);
    put16(directory, static_cast<std::uint32_t>(name.size()));
    put16(directory, 0), put16(directory, 0), put16(directory, 0), put16(directory, 0);
    put32(directory, 0), put32(directory, offset);
    directory += name;
    ++entries;
  }
  const auto directory_offset = static_cast<std::uint32_t>(zip.size());
  zip += directory;
  put32(zip, 0x06054b50);
  put16(zip, 0), put16(zip, 0), put16(zip, entries), put16(zip, entries);
  put32(zip, static_cast<std::uint32_t>(directory.size())), put32(zip, directory_offset);
  put16(zip, 0);
  std::ofstream(scratch.file("model.keras"), std::ios::binary) << zip;
  const io::KerasModel keras = io::load_keras_model(scratch.file("model.keras"));
  EXPECT_EQ(keras.model.count_params(), 320 + 18496 + (11 * 11 * 64 + 1) * 10);
  std::ofstream(scratch.file("broken.keras"), std::ios::binary) << zip.substr(0, 100);
  EXPECT_NE(error_of<IoError>([&] {
              io::load_keras_model(scratch.file("broken.keras"));
            }).find("broken.keras"),
            std::string::npos);
}

// A Sequential never built in Keras has no input shape: the caller's (the data's) is used.
TEST(KerasModel, AnUnbuiltSequentialTakesTheGivenInputShape) {
  ScratchDir scratch;
  json model = sequential_cnn();
  model["config"]["layers"].erase(0);
  const std::string path = write_json(scratch, "unbuilt.json", model);
  EXPECT_NE(error_of([&] { io::load_keras_model(path); }).find("has no input shape"),
            std::string::npos);
  EXPECT_EQ(io::load_keras_model(path, Shape{32, 32, 3}).model.input_shape(),
            (Shape{-1, 32, 32, 3}));
}

TEST(KerasModel, WhatTandemLacksIsAnErrorNamingTheFileLayerAndArgument) {
  ScratchDir scratch;
  const auto error_for = [&](const std::function<void(json&)>& change) {
    json model = sequential_cnn();
    change(model);
    const std::string path = write_json(scratch, "model.json", model);
    return error_of([&] { io::load_keras_model(path); });
  };
  const std::string path = scratch.file("model.json");
  std::string message = error_for(
      [](json& model) { model["config"]["layers"][1]["class_name"] = "SeparableConv2D"; });
  EXPECT_NE(message.find(path + ": layer 'conv2d' (SeparableConv2D): layer class 'SeparableConv2D' "
                                "is not one Tandem has"),
            std::string::npos)
      << message;
  message = error_for([](json& model) {
    model["config"]["layers"][1]["config"]["kernel_regularizer"] = {{"class_name", "L2"}};
  });
  EXPECT_NE(message.find("layer 'conv2d' (Conv2D): argument kernel_regularizer="),
            std::string::npos)
      << message;
  message = error_for([](json& model) {
    model["config"]["layers"][1]["config"]["data_format"] = "channels_first";
  });
  EXPECT_NE(message.find("NHWC (channels_last)"), std::string::npos) << message;
  message = error_for([](json& model) { model["config"]["layers"][5]["config"]["flavour"] = 3; });
  EXPECT_NE(message.find("layer 'dropout' (Dropout): unknown argument 'flavour'=3"),
            std::string::npos)
      << message;
  message = error_for([](json& model) {
    model["config"]["layers"][6]["config"]["kernel_initializer"] = initializer("Orthogonal");
  });
  EXPECT_NE(message.find("kernel_initializer="), std::string::npos) << message;
  message = error_for([](json& model) {
    model["config"]["layers"][0]["config"]["batch_input_shape"] = {nullptr, nullptr, 28, 1};
  });
  EXPECT_NE(message.find("free axis"), std::string::npos) << message;
  message = error_for([](json& model) { model["class_name"] = "Estimator"; });
  EXPECT_NE(message.find("'Estimator' is not supported"), std::string::npos) << message;
  std::ofstream(scratch.file("text.json")) << "not json";
  EXPECT_NE(
      error_of<IoError>([&] { io::load_keras_model(scratch.file("text.json")); }).find("not JSON"),
      std::string::npos);
  json two_outputs = functional_residual();
  two_outputs["config"]["output_layers"] = {{"logits", 0, 0}, {"gap", 0, 0}};
  const std::string two = write_json(scratch, "two.json", two_outputs);
  EXPECT_NE(error_of([&] { io::load_keras_model(two); }).find("one input and one output"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
