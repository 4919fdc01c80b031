// Keras files without TensorFlow: a .keras export read back by Tandem's own Keras reader (the
// architecture through load_keras_model, the weights through load_keras_weights) predicts what
// the model did, bit for bit; the weights group names follow Keras' saving library; a damaged
// file, another model's weights and files of other kinds are refused by name and change nothing.
// (tests/io/interop_test.cpp loads the exports in TensorFlow and Keras-written files in Tandem.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/files.h"
#include "core/tensor_copy.h"
#include "io/io_support.h"
#include "support/errors.h"

namespace tandem {
namespace {

using testing::error_of;
using testing::ScratchDir;

template <typename Fn>
std::string io_error(Fn&& fn) {
  return error_of<IoError>(std::forward<Fn>(fn));
}

TEST(KerasFile, AnExportReadsBackWithTheSamePredictions) {
  ScratchDir scratch;
  for (const std::string name : {"cnn", "resnet_small"}) {
    SCOPED_TRACE(name);
    nn::clear_session();
    manual_seed(3);
    nn::Model model = nn::zoo::build(name, {12, 12, 1}, 4);
    const std::string path = scratch.file(name + ".keras");
    io::export_keras(model, path);
    const std::string bytes = [&] {
      const std::vector<std::uint8_t> raw = read_whole_file(path);
      return std::string(raw.begin(), raw.end());
    }();
    for (const std::string member : {"metadata.json", "config.json", "model.weights.h5",
                                     "\"keras_version\":\"2.15.0\"", "Functional"}) {
      EXPECT_NE(bytes.find(member), std::string::npos) << member;
    }
    nn::clear_session();
    io::KerasModel loaded = io::load_keras_model(path);
    EXPECT_EQ(loaded.class_name, "Functional");
    io::load_keras_weights(loaded.model, path);
    const Tensor x = random_uniform({3, 12, 12, 1}, 0.0, 1.0, DType::f32);
    EXPECT_TRUE(testing::same_bits(loaded.model.predict(x), model.predict(x)));
  }
}

// A model whose weights hold NaN or infinities (saved after its training diverged) is refused when
// its weights load, naming the file, the weight and the layer: it would only train on NaN.
TEST(KerasFile, WeightsThatAreNotFiniteAreRefusedByName) {
  ScratchDir scratch;
  nn::clear_session();
  nn::Model model = nn::zoo::build("mlp", {4, 4, 1}, 3);
  const Tensor kernel = model.layers().back().weights().front();  // the last Dense's kernel
  std::vector<float> values = kernel.to_vector<float>();
  values[1] = std::nanf("");
  values[4] = std::numeric_limits<float>::infinity();
  tandem::detail::copy_into(kernel, Tensor::from_vector(values, kernel.shape()), "test");
  const std::string path = scratch.file("diverged.keras");
  io::export_keras(model, path);
  nn::clear_session();
  io::KerasModel loaded = io::load_keras_model(path);
  const std::string message = io_error([&] { io::load_keras_weights(loaded.model, path); });
  EXPECT_NE(message.find(path + ": weight 0 of layer '" + model.layers().back().name() +
                         "' holds 2 NaN or infinite values of "),
            std::string::npos)
      << message;
  // The same for a saved model.
  model.save(scratch.file("saved"));
  const std::string saved = io_error([&] { io::load_model(scratch.file("saved")); });
  EXPECT_NE(saved.find("holds 2 NaN or infinite values"), std::string::npos) << saved;
  EXPECT_NE(saved.find(kernel.name()), std::string::npos) << saved;
}

TEST(KerasFile, RefusesWhatItCannotReadOrWriteAndChangesNothing) {
  ScratchDir scratch;
  nn::clear_session();
  nn::Model cnn = nn::zoo::build("cnn", {12, 12, 1}, 4);
  io::export_keras(cnn, scratch.file("cnn.keras"));
  nn::Model mlp = nn::zoo::build("mlp", {12, 12, 1}, 4);
  const std::vector<Tensor> before = mlp.weights();
  std::vector<Tensor> copies;
  for (const Tensor& weight : before)
    copies.push_back(weight.clone());
  const std::string other =
      io_error([&] { io::load_keras_weights(mlp, scratch.file("cnn.keras")); });
  EXPECT_NE(other.find("layer 'dense_"), std::string::npos) << other;
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(testing::same_bits(before[i], copies[i])) << before[i].name();

  write_file_atomically(scratch.file("notes.txt"), std::string_view("not keras"));
  EXPECT_NE(io_error([&] {
              io::load_keras_weights(mlp, scratch.file("notes.txt"));
            }).find("neither a .keras archive nor an HDF5 file"),
            std::string::npos);
  std::vector<std::uint8_t> damaged = read_whole_file(scratch.file("cnn.keras"));
  damaged.resize(damaged.size() / 2);
  write_file_atomically(scratch.file("half.keras"), damaged);
  EXPECT_NE(
      io_error([&] { io::load_keras_weights(cnn, scratch.file("half.keras")); }).find("half.keras"),
      std::string::npos);

  nn::Sequential tokens({nn::Embedding(10, 4)}, "tokens");
  tokens.build({6});
  EXPECT_NE(error_of([&] {
              io::export_keras(tokens, scratch.file("tokens.keras"));
            }).find("(Embedding) has no Keras translation yet"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(scratch.file("tokens.keras")));
}

}  // namespace
}  // namespace tandem
