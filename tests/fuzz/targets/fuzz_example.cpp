// tf.train.Example parsing, without a spec and with one: an Element or an error, nothing else.
#include <span>

#include "tandem/tfrecord.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace td = tandem::data;
  const std::span<const std::uint8_t> bytes(data, size);
  try {
    const td::Element element = td::parse_example(bytes);
    // What parses must serialize and parse again.
    (void)td::parse_example(td::serialize_example(element));
  } catch (const tandem::Error&) {
  }
  static const td::ExampleSpec spec{{"image", td::FeatureSpec::bytes({2, 2})},
                                    {"label", td::FeatureSpec::int64({}, tandem::DType::i32)},
                                    {"scores", td::FeatureSpec::float32({-1})}};
  try {
    (void)td::parse_example(bytes, &spec, "fuzz");
  } catch (const tandem::Error&) {
  }
  return 0;
}
