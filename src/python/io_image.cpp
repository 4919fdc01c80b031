// tf.io's tf.train.Example parsing and tf.image's codecs and resize, over the data layer's
// (tandem/tfrecord.h, tandem/image.h). Byte strings are rank-1 uint8 tensors, as Tandem's
// pipelines carry them.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <span>

#include "python/bindings.h"
#include "tandem/error.h"
#include "tandem/image.h"
#include "tandem/tfrecord.h"

namespace tandem::python {
namespace {

// A feature spec from Python: (kind, shape, dtype name, default values or None).
using FeatureTuple = std::tuple<std::string, std::vector<std::int64_t>, std::string,
                                std::optional<std::vector<double>>>;

data::FeatureSpec feature_spec(const std::string& name, const FeatureTuple& feature) {
  const auto& [kind, shape, dtype, default_value] = feature;
  data::FeatureSpec spec;
  if (kind == "bytes") {
    spec = data::FeatureSpec::bytes(shape.empty() ? Shape{-1} : Shape(shape));
  } else if (kind == "int64") {
    spec = data::FeatureSpec::int64(shape, dtype_from_tf_name(dtype));
  } else if (kind == "float32") {
    spec = data::FeatureSpec::float32(shape, dtype_from_tf_name(dtype));
  } else {
    throw InvalidArgument("parse_single_example: feature '" + name + "' has kind '" + kind +
                          "'; FixedLenFeature takes tf.string, tf.int64 or tf.float32");
  }
  spec.default_value = default_value;
  return spec;
}

const Tensor& bytes_of(const Tensor& tensor, const char* what) {
  if (tensor.dtype() != DType::u8 || tensor.rank() != 1) {
    throw InvalidArgument(std::string(what) + ": expects a byte string (a rank-1 uint8 tensor, " +
                          "as TFRecordDataset and parse_single_example give), got " +
                          tf_dtype_name(tensor.dtype()) + " " + shape_str(tensor.shape()));
  }
  return tensor;
}

}  // namespace

void bind_io_image(nb::module_& module) {
  module.def(
      "parse_example",
      [](const Tensor& serialized, const std::map<std::string, FeatureTuple>& features) {
        data::ExampleSpec spec;
        for (const auto& [name, feature] : features)
          spec[name] = feature_spec(name, feature);
        const Tensor& bytes = bytes_of(serialized, "parse_single_example");
        const auto* data = static_cast<const std::uint8_t*>(bytes.raw_data());
        const data::Element element =
            data::parse_example(std::span(data, static_cast<std::size_t>(bytes.numel())), &spec,
                                "parse_single_example");
        std::map<std::string, Tensor> parsed;
        for (const auto& [name, value] : element)
          parsed[name] = value;
        return parsed;
      },
      nb::arg("serialized"), nb::arg("features"));
  module.def(
      "decode_image",
      [](const Tensor& contents, int channels) {
        image::DecodeOptions options;
        options.channels = channels;
        nb::gil_scoped_release released;
        return image::decode(bytes_of(contents, "decode_image"), options, "decode_image");
      },
      nb::arg("contents"), nb::arg("channels"));
  module.def(
      "resize_image",
      [](const Tensor& image, std::int64_t height, std::int64_t width) {
        nb::gil_scoped_release released;
        return image::resize(image, height, width);
      },
      nb::arg("image"), nb::arg("height"), nb::arg("width"));
  module.def("bytes", [](nb::bytes value) {
    return data::Element::bytes(std::string_view(value.c_str(), value.size()));
  });
  module.def("serialize_example", [](const std::map<std::string, Tensor>& features) {
    data::Element element;
    for (const auto& [name, value] : features)
      element.set(name, value);
    const std::vector<std::uint8_t> serialized = data::serialize_example(element);
    return nb::bytes(reinterpret_cast<const char*>(serialized.data()), serialized.size());
  });
}

}  // namespace tandem::python
