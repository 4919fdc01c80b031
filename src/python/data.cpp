// tf.data's native half: data::Pipeline (Tandem's tf.data) from Python. Elements cross as dicts
// of tensors keyed by component name; python/tandem/data.py gives them TensorFlow's structure
// (a tensor, a tuple, a dict). A map function written in Python runs on the pipeline's threads
// under the GIL; everything else runs without it.
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "python/bindings.h"
#include "tandem/data.h"
#include "tandem/error.h"
#include "tandem/pipeline.h"

namespace tandem::python {
namespace {

nb::dict element_dict(const data::Element& element) {
  nb::dict components;
  for (const auto& [name, value] : element)
    components[name.c_str()] = value;
  return components;
}

data::Element element_of(const nb::handle& components, const char* what) {
  if (!nb::isinstance<nb::dict>(components)) {
    throw InvalidArgument(std::string(what) + " must give a dict of tensors");
  }
  data::Element element;
  for (const auto& [name, value] : nb::cast<nb::dict>(components)) {
    if (!nb::isinstance<Tensor>(value)) {
      throw InvalidArgument(
          std::string(what) + ": component '" + nb::cast<std::string>(name) + "' is a " +
          nb::cast<std::string>(nb::str(value.type().attr("__name__"))) + ", not a tensor");
    }
    element.set(nb::cast<std::string>(name), nb::cast<Tensor>(value));
  }
  return element;
}

// A Python function of a dict of tensors as a MapFn: called under the GIL on whichever thread of
// the pipeline runs it; the function object is released under the GIL too.
data::MapFn python_map(nb::object function) {
  auto shared = held_under_gil(std::move(function));
  return [shared](data::Element element) {
    nb::gil_scoped_acquire gil;
    const nb::object result = (*shared)(element_dict(element));
    data::Element mapped = element_of(result, "a map function");
    mapped.set_origin(element.origin());
    mapped.set_random_key(element.random_key());
    return mapped;
  };
}

}  // namespace

void bind_data(nb::module_& module) {
  nb::class_<data::ElementIterator>(module, "ElementIterator")
      .def("next", [](data::ElementIterator& iterator) -> nb::object {
        std::optional<data::Element> element;
        {
          nb::gil_scoped_release released;
          element = iterator.next();
        }
        if (!element) return nb::none();
        return element_dict(*element);
      });

  nb::class_<data::Pipeline>(module, "Pipeline")
      .def_static(
          "from_tensor_slices",
          [](const nb::dict& columns) {
            return data::Pipeline::from_tensor_slices(element_of(columns, "from_tensor_slices"));
          })
      .def_static("list_files", &data::Pipeline::list_files)
      .def_static(
          "tfrecord",
          [](std::vector<std::string> files) { return data::Pipeline::tfrecord(std::move(files)); })
      .def("map",
           [](const data::Pipeline& pipeline, nb::object function, int num_parallel_calls,
              bool deterministic, const std::string& name) {
             data::MapOptions options;
             options.num_parallel_calls = num_parallel_calls;
             options.deterministic = deterministic;
             options.name = name;
             return pipeline.map(python_map(std::move(function)), options);
           })
      .def("shuffle", &data::Pipeline::shuffle)
      .def("batch", &data::Pipeline::batch)
      .def("prefetch", &data::Pipeline::prefetch)
      .def("cache", &data::Pipeline::cache)
      .def("repeat", &data::Pipeline::repeat)
      .def("take", &data::Pipeline::take)
      .def("skip", &data::Pipeline::skip)
      .def("shard", &data::Pipeline::shard)
      .def("with_keys", &data::Pipeline::with_keys)
      .def("cardinality", &data::Pipeline::cardinality)
      .def("describe", &data::Pipeline::describe)
      .def("start", [](const data::Pipeline& pipeline, std::int64_t pass) {
        nb::gil_scoped_release released;
        return pipeline.start(pass);
      });
  module.def("read_idx", &data::read_idx, nb::arg("path"));
  module.def(
      "fashion_mnist_files",
      [](const std::string& split) {
        const data::IdxFiles files =
            data::fashion_mnist_files(data::kFashionMnistDefaultDir, split);
        return nb::make_tuple(files.images, files.labels);
      },
      nb::arg("split"));
  module.attr("AUTOTUNE") = data::kAutotune;
  module.attr("INFINITE_CARDINALITY") = data::kInfiniteCardinality;
  module.attr("UNKNOWN_CARDINALITY") = data::kUnknownCardinality;
}

}  // namespace tandem::python
