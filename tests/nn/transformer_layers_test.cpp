// The layers a transformer encoder is made of: Embedding, PositionEmbedding, LayerNormalization,
// MultiHeadAttention and GlobalAveragePooling1D.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/gradient_check.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

using testing::expect_close;
using testing::random_tensor;

Tensor values(const std::vector<double>& data, const Shape& shape, DType dtype = DType::f64) {
  return cast(Tensor::from_vector(data, shape), dtype);
}

TEST(Embedding, LooksUpRowsAndTrainsThemByScatterAdd) {
  nn::clear_session();
  nn::Embedding embedding(4, 2);
  const Tensor ids = Tensor::from_vector<std::int32_t>({3, 0, 3}, {1, 3});  // (1, 3)
  const Tensor vectors = embedding(ids);
  EXPECT_EQ(embedding.name(), "embedding");
  EXPECT_EQ(vectors.shape(), (Shape{1, 3, 2}));
  EXPECT_EQ(vectors.dtype(), DType::f32);
  const Tensor table = embedding.weights()[0];  // (4, 2), U(-0.05, 0.05)
  EXPECT_EQ(table.shape(), (Shape{4, 2}));
  for (float value : table.to_vector<float>())
    EXPECT_LE(std::abs(value), 0.05f);
  embedding.set_weights({values({0, 1, 10, 11, 20, 21, 30, 31}, {4, 2}, DType::f32)});
  expect_close(embedding(ids), values({30, 31, 0, 1, 30, 31}, {1, 3, 2}), 0);

  GradientTape tape;
  const Tensor loss = sum(embedding(ids) * values({1, 2, 3, 4, 5, 6}, {1, 3, 2}, DType::f32));
  const Tensor grad = tape.gradient(loss, embedding.trainable_weights())[0];
  // Row 3 appears twice: its gradient is the sum of both positions' weights.
  expect_close(grad, values({3, 4, 0, 0, 0, 0, 6, 8}, {4, 2}), 0);
}

TEST(Embedding, RejectsFloatIdsAndIdsOutsideTheVocabulary) {
  nn::Embedding embedding(4, 2);
  EXPECT_THROW(embedding(Tensor::zeros({1, 2})), InvalidArgument);
  try {
    embedding(Tensor::from_vector<std::int64_t>({1, 9}, {1, 2}));
    FAIL() << "id 9 of a 4-row table was accepted";
  } catch (const InvalidArgument& error) {
    EXPECT_NE(std::string(error.what()).find("index 9"), std::string::npos) << error.what();
  }
  EXPECT_THROW(nn::Embedding(0, 2), InvalidArgument);
  EXPECT_THROW(nn::Embedding(4, 2, "sideways"), InvalidArgument);
}

TEST(PositionEmbedding, GivesTheFirstRowsForEveryExample) {
  nn::PositionEmbedding positions(5);
  const Tensor x = Tensor::zeros({2, 3, 2});  // (batch, length, features)
  const Tensor y = positions(x);
  EXPECT_EQ(y.shape(), x.shape());
  const Tensor table = positions.weights()[0];  // (5, 2)
  EXPECT_EQ(table.shape(), (Shape{5, 2}));
  const std::vector<float> rows = table.to_vector<float>();
  const std::vector<float> out = y.to_vector<float>();
  for (int example = 0; example < 2; ++example) {
    for (int i = 0; i < 6; ++i)
      EXPECT_EQ(out[static_cast<std::size_t>(example * 6 + i)], rows[i]);
  }
  EXPECT_THROW(positions(Tensor::zeros({1, 6, 2})), InvalidArgument);  // longer than 5
  EXPECT_THROW(positions(Tensor::zeros({1, 3, 4})), InvalidArgument);  // other features
}

TEST(LayerNormalization, NormalisesEachPositionAndKeepsF32ParametersForBf16) {
  nn::LayerNormalization norm(1e-3);
  const Tensor x = values({1, 2, 3, 6, -1, 0, 1, 0}, {2, 4});
  const Tensor y = norm(x);
  EXPECT_EQ(norm.weights()[0].dtype(), DType::f64);
  const std::vector<double> out = y.to_vector<double>();
  for (int row = 0; row < 2; ++row) {
    double mean = 0;
    double square = 0;
    for (int k = 0; k < 4; ++k)
      mean += out[static_cast<std::size_t>(row * 4 + k)] / 4;
    for (int k = 0; k < 4; ++k) {
      square += std::pow(out[static_cast<std::size_t>(row * 4 + k)] - mean, 2) / 4;
    }
    EXPECT_NEAR(mean, 0.0, 1e-12);
    EXPECT_NEAR(square, 1.0, 5e-3);  // epsilon takes a little off the unit variance
  }
  mixed_precision::set_global_policy("mixed_bfloat16");
  nn::LayerNormalization mixed;
  mixed_precision::clear_global_policy();
  const Tensor bf16_y = mixed(cast(x, DType::f32));
  EXPECT_EQ(bf16_y.dtype(), DType::bf16);
  EXPECT_EQ(mixed.weights()[0].dtype(), DType::f32);
  EXPECT_THROW(nn::LayerNormalization(0.0), InvalidArgument);
}

// Self-attention against the same computation written out with plain ops.
TEST(MultiHeadAttention, MatchesScaledDotProductAttentionPerHead) {
  nn::MultiHeadAttention attention(2, 3);
  const Tensor x = random_tensor({2, 4, 5});  // (batch, length, features)
  const Tensor y = attention(x);
  ASSERT_EQ(y.shape(), x.shape());
  const std::vector<Tensor> w = attention.weights();  // q, q bias, k, k bias, v, v bias, o, o bias
  ASSERT_EQ(w.size(), 8u);
  EXPECT_EQ(w[0].shape(), (Shape{5, 6}));
  EXPECT_EQ(w[6].shape(), (Shape{6, 5}));
  const std::vector<Tensor> biases = {random_tensor({6}), random_tensor({6}), random_tensor({6}),
                                      random_tensor({5})};
  attention.set_weights({w[0], biases[0], w[2], biases[1], w[4], biases[2], w[6], biases[3]});
  const Tensor actual = attention(x);
  std::vector<Tensor> heads;
  for (std::int64_t h = 0; h < 2; ++h) {
    auto head = [&](int kernel, int bias) {  // (batch, length, 3) of head h
      const Tensor projected =
          matmul(x, w[static_cast<std::size_t>(kernel)], biases[static_cast<std::size_t>(bias)]);
      return slice(projected, {0, 0, 3 * h}, {2, 4, 3});
    };
    const Tensor q = head(0, 0);
    const Tensor k = head(2, 1);
    const Tensor v = head(4, 2);
    const Tensor scores = matmul(q, k, false, true) / std::sqrt(3.0);  // (batch, length, length)
    heads.push_back(matmul(softmax(scores, -1), v));                   // (batch, length, 3)
  }
  const Tensor expected = matmul(concat(heads, -1), w[6], biases[3]);
  expect_close(actual, expected, 1e-10);
}

TEST(MultiHeadAttention, TrainsEveryWeightAndDropsAttentionOnlyWhileTraining) {
  nn::MultiHeadAttention attention(2, 2, /*dropout=*/0.5, /*seed=*/7);
  const Tensor x = random_tensor({1, 3, 4}, -1, 1, 0.05, DType::f32);
  expect_close(attention(x), attention(x), 0);  // inference: no dropout, deterministic
  GradientTape tape;
  const Tensor loss = sum(square(attention(x, /*training=*/true)));
  const std::vector<Tensor> grads = tape.gradient(loss, attention.trainable_weights());
  ASSERT_EQ(grads.size(), 8u);
  for (const Tensor& grad : grads)
    ASSERT_TRUE(grad.defined());
  EXPECT_THROW(nn::MultiHeadAttention(0, 2), InvalidArgument);
  EXPECT_THROW(nn::MultiHeadAttention(2, 2, 1.0), InvalidArgument);
  EXPECT_THROW(attention(Tensor::zeros({3, 4})), InvalidArgument);
}

TEST(GlobalAveragePooling1D, AveragesTheSteps) {
  const Tensor x = values({1, 2, 3, 4, 5, 6}, {1, 3, 2});
  expect_close(nn::GlobalAveragePooling1D()(x), values({3, 4}, {1, 2}), 1e-12);
  EXPECT_THROW(nn::GlobalAveragePooling1D()(Tensor::zeros({2, 3})), InvalidArgument);
}

// Every new layer survives save and load through make_layer with its config.
TEST(TransformerLayers, MakeLayerRebuildsThemFromTheirConfigs) {
  for (const nn::Layer& layer : std::vector<nn::Layer>{
           nn::Embedding(7, 3), nn::PositionEmbedding(9), nn::LayerNormalization(1e-6),
           nn::MultiHeadAttention(2, 4, 0.1, 3), nn::GlobalAveragePooling1D()}) {
    const std::optional<nn::LayerConfig> config = layer.impl().config();
    ASSERT_TRUE(config.has_value()) << layer.impl().class_name();
    const nn::Layer remade =
        nn::make_layer(layer.impl().class_name(), layer.name() + "_copy", *config);
    EXPECT_EQ(std::string(remade.impl().class_name()), layer.impl().class_name());
    EXPECT_EQ(*remade.impl().config(), *config);
  }
}

}  // namespace
}  // namespace tandem
