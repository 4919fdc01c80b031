// Typed op attributes: each struct survives the trip through Attrs, and every op a training step
// runs carries exactly the attributes its struct declares, written by its wrapper.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ops/backend.h"
#include "ops/op_attrs.h"
#include "tandem/tandem.h"

namespace tandem {
namespace {

TEST(OpAttrs, StructsRoundTripThroughAttrs) {
  const Conv2DBackwardFilterAttrs conv{{{2, 1}, Padding::same, {1, 3}}, {3, 3, 8, 16}, true};
  const Attrs written = make_op_attrs<OpKind::conv2d_backward_filter>(conv);
  EXPECT_EQ(written.str(),
            "strides=[2, 1], padding=same, dilations=[1, 3], filter_shape=[3, 3, 8, 16], "
            "with_bias=true");
  const Conv2DBackwardFilterAttrs read = op_attrs<OpKind::conv2d_backward_filter>(written);
  EXPECT_EQ(read.strides, conv.strides);
  EXPECT_EQ(read.padding, Padding::same);
  EXPECT_EQ(read.dilations, conv.dilations);
  EXPECT_EQ(read.filter_shape, conv.filter_shape);
  EXPECT_TRUE(read.with_bias);

  AdamOptions adam;
  adam.beta1 = 0.25;
  adam.weight_decay = 0.125;
  const AdamOptions adam_read =
      op_attrs<OpKind::adam_update>(make_op_attrs<OpKind::adam_update>({adam}));
  EXPECT_EQ(adam_read.beta1, 0.25);
  EXPECT_EQ(adam_read.beta2, adam.beta2);
  EXPECT_EQ(adam_read.weight_decay, 0.125);
  EXPECT_EQ(op_attrs<OpKind::cast>(make_op_attrs<OpKind::cast>({DType::bf16})).dtype, DType::bf16);
}

TEST(OpAttrs, AMissingAttributeIsAnInternalErrorNamingIt) {
  try {
    op_attrs<OpKind::layer_norm>(Attrs{});
    FAIL() << "an empty Attrs gave layer_norm an epsilon";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("'epsilon'"), std::string::npos) << error.what();
  }
}

// Records every op with its attribute keys, to compare with the keys its struct declares.
class AttrKeysObserver final : public OpObserver {
 public:
  void after_op(OpKind kind, std::span<const Tensor>, std::span<const Tensor>,
                const Attrs& attrs) override {
    std::vector<std::string_view> keys;
    for (const auto& [key, value] : attrs.entries())
      keys.push_back(key);
    const std::vector<std::string_view> declared = op_attr_keys(kind);
    if (keys != declared) mismatches.insert(op_name(kind));
    seen.insert(op_name(kind));
  }
  std::set<std::string> mismatches;
  std::set<std::string> seen;
};

TEST(OpAttrs, EveryOpOfATrainingStepCarriesExactlyItsDeclaredAttributes) {
  manual_seed(5);
  const Tensor images = random_uniform({16, 28, 28, 1}, 0.0, 1.0);
  std::vector<std::int32_t> labels(16);
  for (std::size_t i = 0; i < labels.size(); ++i)
    labels[i] = static_cast<std::int32_t>(i % 10);
  data::TensorDataset dataset(images, Tensor::from_vector(labels, {16}));
  dataset.batch(8);
  nn::Model model = nn::zoo::build("cnn", {28, 28, 1}, 10);
  model.compile({.optimizer = train::Adam(1e-3),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {"accuracy"}});
  AttrKeysObserver observer;
  add_op_observer(&observer);
  model.fit(dataset, {.verbose = 0});
  remove_op_observer(&observer);
  EXPECT_TRUE(observer.mismatches.empty())
      << "first op whose attributes differ from its struct: " << *observer.mismatches.begin();
  for (const char* op : {"conv2d", "conv2d_backward_filter", "max_pool2d", "matmul", "adam_update"})
    EXPECT_TRUE(observer.seen.contains(op)) << op;
}

}  // namespace
}  // namespace tandem
