// Interop with TensorFlow (pip tensorflow-cpu, pinned in scripts/requirements-tfrecord.txt):
// TensorFlow's tf.data reads the TFRecord files Tandem writes, plain and gzip-compressed, with
// every feature's value intact, and Tandem reads the ones TensorFlow's TFRecordWriter writes
// (tests/data/tfrecord_interop.py). Skipped, with the reason, where TensorFlow cannot be
// installed because the package index cannot be reached.
#include <gtest/gtest.h>

#include "data/idx_files.h"
#include "support/python_env.h"
#include "tandem/tfrecord.h"

namespace tandem::data {
namespace {

constexpr int kRecords = 10;

// Record i: the features tfrecord_interop.py checks.
Pipeline tandem_examples() {
  return Pipeline::range(kRecords).map([](Element element) {
    const double i = element.at("value").item();
    Element example;
    example.set("image", Tensor::full({6}, i, DType::u8));
    example.set("label", Tensor::scalar(i, DType::i64));
    example.set("weights", Tensor::from_vector<float>({0.5f, static_cast<float>(-i)}, {2}));
    example.set("ids", Tensor::from_vector<std::int64_t>({-1, std::int64_t{1} << 40}, {2}));
    return example;
  });
}

TEST(TFRecordInterop, TensorFlowAndTandemReadEachOthersFiles) {
  TANDEM_REQUIRE_PYTHON_ENV(env, "tfrecord");
  const std::string source = TANDEM_SOURCE_DIR;

  testing::ScratchDir dir;
  ASSERT_EQ(write_tfrecord(tandem_examples(), dir.file("tandem.tfrecord")), kRecords);
  ASSERT_EQ(write_tfrecord(tandem_examples(), dir.file("tandem.tfrecord.gz"), Compression::gzip),
            kRecords);
  ASSERT_EQ(testing::run_shell(testing::shell_quote(env.python) + " " +
                               testing::shell_quote(source + "/tests/data/tfrecord_interop.py") +
                               " " + testing::shell_quote(dir.path().string())),
            0)
      << "TensorFlow could not read Tandem's TFRecord files (see the message above)";

  const ExampleSpec spec{{"image", FeatureSpec::bytes({6})},
                         {"label", FeatureSpec::int64({}, DType::i32)},
                         {"weights", FeatureSpec::float32({2})},
                         {"name", FeatureSpec::bytes()}};
  for (const std::string name : {"tf.tfrecord", "tf.tfrecord.gz"}) {
    const std::vector<Element> examples =
        Pipeline::tfrecord({dir.file(name)}).map(parse_examples(spec)).collect();
    ASSERT_EQ(examples.size(), static_cast<std::size_t>(kRecords)) << name;
    for (int i = 0; i < kRecords; ++i) {
      const Element& example = examples[static_cast<std::size_t>(i)];
      EXPECT_EQ(example.at("image").to_vector<int>(), std::vector<int>(6, i)) << name;
      EXPECT_EQ(example.at("label").item(), i) << name;
      EXPECT_EQ(example.at("weights").to_vector<float>(),
                (std::vector<float>{0.25f * static_cast<float>(i), -1.5f}))
          << name;
      EXPECT_EQ(example.string("name"), "example-" + std::to_string(i)) << name;
    }
  }
}

}  // namespace
}  // namespace tandem::data
