#pragma once
// Shared by the io tests: a small compiled model with every kind of weight (Conv2D, batch norm,
// Dense), a data set it trains on, bitwise comparison of weights, and ways to damage files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/idx_files.h"
#include "tandem/data.h"
#include "tandem/io.h"
#include "tandem/tandem.h"

namespace tandem::testing {

// A layer without a config: the exporters refuse it by name.
class CustomLayer final : public nn::LayerBase {
 public:
  CustomLayer() : LayerBase("custom", "") {}
  const char* class_name() const override { return "Custom"; }
  Shape compute_output_shape(std::span<const Shape> shapes) const override { return shapes[0]; }
  Tensor call(std::span<const Tensor> inputs, bool) override { return inputs[0]; }
};

// 6x6x1 images whose class (of 3) is the brightest third of the image, plus noise.
struct ImageProblem {
  Tensor x;  // (N, 6, 6, 1)
  Tensor y;  // (N,) i32
};

inline ImageProblem image_problem(std::int64_t count, std::uint64_t seed) {
  Generator generator(seed);
  std::vector<float> pixels =
      random_uniform({count, 6, 6, 1}, 0.0, 0.5, DType::f32, generator).to_vector<float>();
  std::vector<std::int32_t> labels(static_cast<std::size_t>(count));
  for (std::int64_t n = 0; n < count; ++n) {
    const auto label = static_cast<std::int32_t>(n % 3);
    labels[static_cast<std::size_t>(n)] = label;
    for (std::int64_t row = 2 * label; row < 2 * label + 2; ++row) {
      for (std::int64_t col = 0; col < 6; ++col)
        pixels[static_cast<std::size_t>(n * 36 + row * 6 + col)] += 0.5f;
    }
  }
  return {Tensor::from_vector(pixels, {count, 6, 6, 1}), Tensor::from_vector(labels, {count})};
}

// Conv2D -> BatchNormalization -> ReLU -> MaxPool -> Flatten -> Dense(8, relu) -> Dense(3), built
// from `seed` and compiled with Adam.
inline nn::Model small_model(std::uint64_t seed = 5,
                             train::Spec<train::Optimizer> optimizer = train::Adam(0.01)) {
  nn::clear_session();
  manual_seed(seed);
  nn::Sequential model({nn::Conv2D(4, 3, nn::Conv2DConfig{.padding = "same", .use_bias = false}),
                        nn::BatchNormalization(), nn::Activation("relu"), nn::MaxPool2D(),
                        nn::Flatten(), nn::Dense(8, "relu"), nn::Dense(3)},
                       "small");
  model.build({6, 6, 1});
  model.compile({.optimizer = optimizer,
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  model.set_verbose(0);
  return nn::Model(std::move(model));
}

// The training set for small_model: 96 examples in batches of 8, shuffled per epoch.
inline std::shared_ptr<data::TensorDataset> small_dataset() {
  const ImageProblem problem = image_problem(96, 3);
  auto dataset = std::make_shared<data::TensorDataset>(problem.x, problem.y);
  dataset->shuffle(17).batch(8).prefetch(0);
  return dataset;
}

inline bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor host_a = a.to(Device::cpu());
  const Tensor host_b = b.to(Device::cpu());
  return std::memcmp(host_a.raw_data(), host_b.raw_data(), host_a.nbytes()) == 0;
}

// The weights two saved models (Model::save folders) hold are the same, bit for bit.
inline void expect_same_saved_weights(const std::string& expected_dir,
                                      const std::string& actual_dir) {
  const io::Safetensors expected = io::load_safetensors(expected_dir + "/model.safetensors");
  const io::Safetensors actual = io::load_safetensors(actual_dir + "/model.safetensors");
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (std::size_t i = 0; i < expected.tensors.size(); ++i) {
    EXPECT_EQ(actual.tensors[i].first, expected.tensors[i].first);
    EXPECT_TRUE(same_bits(actual.tensors[i].second, expected.tensors[i].second))
        << expected.tensors[i].first << " differs between " << expected_dir << " and "
        << actual_dir;
  }
}

inline void expect_same_weights(const nn::Model& expected, const nn::Model& actual) {
  const std::vector<Tensor> a = expected.weights();
  const std::vector<Tensor> b = actual.weights();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(same_bits(a[i], b[i])) << "weight " << a[i].name() << " differs";
  }
}

// The message of the IoError that `fn` throws.
template <typename Fn>
std::string io_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const IoError& error) {
    return error.what();
  } catch (const std::exception& error) {
    return std::string("(not an IoError: ") + error.what() + ")";
  }
  return "(no IoError thrown)";
}

// XORs one byte of the file in place (no truncation: rewriting a truncated file makes ext4
// flush it, which would make byte-by-byte damage tests wait on the disk).
inline void flip_byte(const std::string& path, std::size_t offset, unsigned char mask = 0x20) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(file.good()) << path;
  file.seekg(static_cast<std::streamoff>(offset));
  const int byte = file.get();
  ASSERT_NE(byte, EOF) << path << " has no byte " << offset;
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(static_cast<char>(byte ^ mask));
  ASSERT_TRUE(file.good()) << path;
}

inline std::vector<std::string> hidden_entries(const std::filesystem::path& directory) {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(directory)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".") && name != ".lock") found.push_back(name);
  }
  return found;
}

}  // namespace tandem::testing
