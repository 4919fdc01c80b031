// Saved models: save then load gives identical predictions for Sequential and functional models
// (every zoo model, a Dropout with its seed); layer configs round-trip through make_layer; a
// saved model is replaced whole and other folders are refused; damage is detected; a layer that
// cannot be saved says why; layers' dtype policies survive loading under another global policy.
#include <gtest/gtest.h>

#include <optional>
#include <set>

#include "io/io_support.h"
#include "support/errors.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using testing::error_of;
using testing::expect_same_weights;
using testing::io_error_of;
using testing::same_bits;
using testing::ScratchDir;

Tensor sample_images(const Shape& shape, std::uint64_t seed) {
  Generator generator(seed);
  Shape batch{5};
  batch.insert(batch.end(), shape.begin(), shape.end());
  return random_uniform(batch, 0.0, 1.0, DType::f32, generator);
}

TEST(SavedModel, EveryZooModelGivesIdenticalPredictionsAfterLoading) {
  for (const std::string name : {"cnn", "mlp", "resnet_small"}) {
    SCOPED_TRACE(name);
    ScratchDir scratch;
    manual_seed(3);
    nn::Model model = nn::zoo::build(name, {28, 28, 1}, 10);
    const Tensor x = sample_images({28, 28, 1}, 4);
    const Tensor expected = model.predict(x);
    model.save(scratch.file("model"));
    nn::Model loaded = load_model(scratch.file("model"));
    EXPECT_TRUE(same_bits(loaded.predict(x), expected));
    expect_same_weights(model, loaded);
    EXPECT_EQ(loaded.name(), model.name());
    EXPECT_EQ(loaded.summary_string(), model.summary_string());
  }
}

// Sets the global dtype policy (nullopt: none) and puts the previous one back.
class GlobalPolicyScope {
 public:
  explicit GlobalPolicyScope(const std::optional<std::string>& name)
      : previous_(mixed_precision::global_policy()) {
    if (name) {
      mixed_precision::set_global_policy(*name);
    } else {
      mixed_precision::clear_global_policy();
    }
  }
  ~GlobalPolicyScope() {
    if (previous_) {
      mixed_precision::set_global_policy(*previous_);
    } else {
      mixed_precision::clear_global_policy();
    }
  }
  GlobalPolicyScope(const GlobalPolicyScope&) = delete;
  GlobalPolicyScope& operator=(const GlobalPolicyScope&) = delete;

 private:
  std::optional<mixed_precision::Policy> previous_;
};

std::vector<std::optional<std::string>> policy_names(const nn::Model& model) {
  std::vector<std::optional<std::string>> names;
  for (const nn::Layer& layer : model.layers()) {
    const auto& policy = layer.impl().dtype_policy();
    names.push_back(policy ? std::optional(policy->name()) : std::nullopt);
  }
  return names;
}

TEST(SavedModel, LayerDtypePoliciesRoundTripWhateverTheGlobalPolicyIsAtLoading) {
  ScratchDir scratch;
  const Tensor x = sample_images({28, 28, 1}, 4);
  {
    // Made under mixed_bfloat16: every layer computes in bfloat16, but the zoo keeps the logits
    // layer in float32.
    nn::Model model = [] {
      const GlobalPolicyScope bf16("mixed_bfloat16");
      manual_seed(3);
      return nn::zoo::build("cnn", {28, 28, 1}, 10);
    }();
    const auto policies = policy_names(model);
    ASSERT_EQ(policies.back(), "float32");
    ASSERT_EQ(policies.front(), "mixed_bfloat16");
    const Tensor expected = model.predict(x);
    model.save(scratch.file("bf16"));

    const GlobalPolicyScope f32("float32");
    nn::Model loaded = load_model(scratch.file("bf16"));
    EXPECT_EQ(policy_names(loaded), policies);
    EXPECT_TRUE(same_bits(loaded.predict(x), expected));
  }
  {
    // Made without a policy: the layers follow their inputs and still do after loading under one.
    nn::Model model = [] {
      const GlobalPolicyScope none(std::nullopt);
      manual_seed(3);
      return nn::zoo::build("mlp", {28, 28, 1}, 10);
    }();
    const Tensor expected = model.predict(x);
    model.save(scratch.file("plain"));
    const GlobalPolicyScope bf16("mixed_bfloat16");
    nn::Model loaded = load_model(scratch.file("plain"));
    for (const auto& policy : policy_names(loaded))
      EXPECT_EQ(policy, std::nullopt);
    EXPECT_TRUE(same_bits(loaded.predict(x), expected));
  }
}

TEST(SavedModel, ASmallTransformerEncoderGivesIdenticalPredictionsAfterLoading) {
  ScratchDir scratch;
  manual_seed(5);
  const nn::zoo::TransformerEncoderConfig config{.vocabulary_size = 40,
                                                 .max_sequence_length = 16,
                                                 .hidden_size = 8,
                                                 .layers = 2,
                                                 .heads = 2,
                                                 .intermediate_size = 16,
                                                 .dropout = 0.1,
                                                 .layer_norm_epsilon = 1e-6};
  nn::Model model = nn::zoo::transformer_encoder(config, 6, 3, "tiny_encoder");
  std::set<std::string> classes;
  for (const nn::Layer& layer : model.layers())
    classes.insert(layer.impl().class_name());
  for (const char* needed : {"Embedding", "PositionEmbedding", "LayerNormalization",
                             "MultiHeadAttention", "GlobalAveragePooling1D", "Dropout"}) {
    ASSERT_TRUE(classes.contains(needed)) << needed;
  }
  // One training step, so the saved weights are not the initial ones.
  std::vector<std::int32_t> ids;
  for (int i = 0; i < 4 * 6; ++i)
    ids.push_back((i * 7 + 3) % 40);
  const Tensor tokens = Tensor::from_vector(ids, {4, 6});  // (batch, length)
  model.compile({.optimizer = train::Adam(1e-2),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true)});
  model.train_on_batch(tokens, Tensor::from_vector<std::int32_t>({0, 1, 2, 1}, {4}));
  const Tensor expected = model.predict(tokens);  // (4, 3)
  model.save(scratch.file("encoder"));
  nn::Model loaded = load_model(scratch.file("encoder"));
  EXPECT_TRUE(same_bits(loaded.predict(tokens), expected));
  expect_same_weights(model, loaded);
  EXPECT_EQ(loaded.summary_string(), model.summary_string());
}

TEST(SavedModel, ATrainedModelWithBatchNormStatisticsRoundTrips) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  model.fit(*testing::small_dataset(), {.epochs = 2});
  model.save(scratch.file("trained"), {"top", "middle", "bottom"});
  nn::Model loaded = load_model(scratch.file("trained"));
  const testing::ImageProblem problem = testing::image_problem(10, 8);
  EXPECT_TRUE(same_bits(loaded.predict(problem.x), model.predict(problem.x)));
  const io::SavedModelInfo info = io::read_saved_model_info(scratch.file("trained"));
  EXPECT_EQ(info.class_names, (std::vector<std::string>{"top", "middle", "bottom"}));
  EXPECT_EQ(info.input_shape, (Shape{6, 6, 1}));
  EXPECT_EQ(info.class_name, "Sequential");
  EXPECT_FALSE(loaded.compiled());
}

TEST(SavedModel, LayerConfigsRoundTrip) {
  ScratchDir scratch;
  nn::clear_session();
  manual_seed(2);
  const nn::SymbolicTensor inputs = nn::Input({8, 8, 3}, DType::f32, "pixels");
  nn::SymbolicTensor x = nn::Conv2D(6, {3, 2},
                                    nn::Conv2DConfig{.strides = {1, 2},
                                                     .padding = "same",
                                                     .dilation_rate = 1,
                                                     .activation = "gelu",
                                                     .use_bias = true,
                                                     .kernel_initializer = "he_normal",
                                                     .name = "stem"})(inputs);
  x = nn::AveragePooling2D({2, 1}, std::nullopt, "same")(x);
  const nn::SymbolicTensor branch = nn::Activation("tanh")(x);
  x = nn::Add()({x, branch});
  x = nn::Dropout(0.25, 77)(nn::GlobalAveragePooling2D()(x));
  const nn::SymbolicTensor outputs = nn::Dense(4, "softmax", false)(x);
  nn::Model model(inputs, outputs, "branchy");
  model.get_layer("stem").set_trainable(false);
  model.save(scratch.file("branchy"));
  nn::Model loaded = load_model(scratch.file("branchy"));
  for (const nn::Layer& layer : model.layers()) {
    const nn::Layer twin = loaded.get_layer(layer.name());
    EXPECT_EQ(twin.impl().config(), layer.impl().config()) << layer.name();
    EXPECT_EQ(twin.trainable(), layer.trainable()) << layer.name();
  }
  const Tensor images = sample_images({8, 8, 3}, 9);
  EXPECT_TRUE(same_bits(loaded.predict(images), model.predict(images)));
  EXPECT_EQ(io::read_saved_model_info(scratch.file("branchy")).class_name, "Functional");
}

TEST(SavedModel, SavingReplacesASavedModelAndRefusesOtherFolders) {
  ScratchDir scratch;
  nn::Model first = testing::small_model(1);
  nn::Model second = testing::small_model(2);
  first.save(scratch.file("model"));
  second.save(scratch.file("model"));
  expect_same_weights(second, load_model(scratch.file("model")));
  EXPECT_TRUE(testing::hidden_entries(scratch.path()).empty());

  fs::create_directory(scratch.path() / "notes");
  testing::write_file(scratch.file("notes/todo.txt"), testing::Bytes(3, 'x'));
  EXPECT_NE(
      io_error_of([&] { first.save(scratch.file("notes")); }).find("not a saved Tandem model"),
      std::string::npos);
  EXPECT_TRUE(fs::exists(scratch.path() / "notes" / "todo.txt"));
  EXPECT_NE(error_of([&] { first.save(scratch.file("bad"), {"just one"}); }).find("class names"),
            std::string::npos);
}

TEST(SavedModel, DamageToEitherFileIsDetected) {
  ScratchDir scratch;
  nn::Model model = testing::small_model();
  model.save(scratch.file("model"));
  for (const char* file : {"model.json", "model.safetensors"}) {
    const std::string path = scratch.file(std::string("model/") + file);
    const testing::Bytes good = testing::read_file(path);
    for (const std::size_t offset : {std::size_t{3}, good.size() / 2, good.size() - 2}) {
      testing::Bytes bad = good;
      bad[offset] ^= 0x10;
      testing::write_file(path, bad);
      EXPECT_NE(io_error_of([&] { load_model(scratch.file("model")); }).find(file),
                std::string::npos)
          << file << " byte " << offset;
    }
    testing::write_file(path, testing::Bytes(good.begin(), good.end() - 7));
    EXPECT_NE(io_error_of([&] { load_model(scratch.file("model")); }).find(file),
              std::string::npos);
    testing::write_file(path, good);
  }
  EXPECT_NO_THROW(load_model(scratch.file("model")));
  EXPECT_NE(io_error_of([&] { load_model(scratch.path().string()); }).find("no model.json"),
            std::string::npos);
}

class Doubler final : public nn::LayerBase {
 public:
  Doubler() : LayerBase("doubler", "") {}
  const char* class_name() const override { return "Doubler"; }
  Shape compute_output_shape(std::span<const Shape> shapes) const override { return shapes[0]; }
  Tensor call(std::span<const Tensor> inputs, bool) override { return inputs[0] * 2.0; }
};

class SavableDoubler final : public nn::LayerBase {
 public:
  explicit SavableDoubler(const std::string& name) : LayerBase("savable_doubler", name) {}
  const char* class_name() const override { return "SavableDoubler"; }
  Shape compute_output_shape(std::span<const Shape> shapes) const override { return shapes[0]; }
  Tensor call(std::span<const Tensor> inputs, bool) override { return inputs[0] * 2.0; }
  std::optional<nn::LayerConfig> config() const override { return nn::LayerConfig{}; }
};

TEST(SavedModel, CustomLayersSaveWhenTheyHaveAConfigAndAreRegistered) {
  ScratchDir scratch;
  nn::Sequential unsavable({nn::Layer(std::make_shared<Doubler>()), nn::Dense(2)});
  unsavable.build({3});
  EXPECT_NE(error_of([&] { unsavable.save(scratch.file("a")); }).find("cannot be saved"),
            std::string::npos);

  nn::Sequential savable({nn::Layer(std::make_shared<SavableDoubler>("twice")), nn::Dense(2)});
  savable.build({3});
  savable.save(scratch.file("b"));
  EXPECT_NE(io_error_of([&] { load_model(scratch.file("b")); }).find("unknown layer class"),
            std::string::npos);
  nn::register_layer("SavableDoubler", [](const std::string& name, const nn::LayerConfig&) {
    return nn::Layer(std::make_shared<SavableDoubler>(name));
  });
  const Tensor x = Tensor::ones({1, 3});
  EXPECT_TRUE(same_bits(load_model(scratch.file("b")).predict(x), savable.predict(x)));
}

TEST(LayerRegistry, MakeLayerNamesTheBadArgument) {
  EXPECT_NE(error_of([] {
              nn::make_layer("Dense", "d", {{"unitz", std::int64_t{3}}});
            }).find("lacks the required argument 'units'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              nn::make_layer("Dense", "d", {{"units", std::int64_t{3}}, {"colour", true}});
            }).find("unknown argument 'colour'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              nn::make_layer("Dense", "d", {{"units", std::string("3")}});
            }).find("'units' must be an integer"),
            std::string::npos);
  EXPECT_NE(error_of([] { nn::make_layer("Conv3D", "c", {}); }).find("unknown layer class"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
