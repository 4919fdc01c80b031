// tf.function's native half: tandem::function (compile.h) over a Python function. The first call
// with an input signature runs the Python function once on symbolic tensors, under the GIL, and
// the library compiles what its ops recorded; later calls with that signature run the compiled
// graph with the GIL released and no Python at all, as TensorFlow runs a traced graph.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "python/bindings.h"
#include "tandem/compile.h"
#include "tandem/error.h"

namespace tandem::python {
namespace {

// The Python function as a step body: flat tensors in, flat tensors out (python/tandem/_function.py
// flattens and rebuilds the caller's structure). Released under the GIL.
StepBody python_body(nb::object function) {
  auto shared = held_under_gil(std::move(function));
  return [shared](const std::vector<Tensor>& inputs) {
    nb::gil_scoped_acquire gil;
    const nb::object results = (*shared)(inputs);
    std::vector<Tensor> outputs;
    for (nb::handle result : results) {
      if (!nb::isinstance<Tensor>(result)) {
        throw InvalidArgument("tf.function: the function returned a " +
                              nb::cast<std::string>(nb::str(result.type().attr("__name__"))) +
                              " where a tensor was expected; return tensors (or None)");
      }
      outputs.push_back(nb::cast<Tensor>(result));
    }
    return outputs;
  };
}

}  // namespace

void bind_function(nb::module_& module) {
  nb::class_<Function>(module, "Function")
      .def("__init__",
           [](Function* self, const std::string& name, nb::object body) {
             new (self) Function(name, python_body(std::move(body)));
           })
      .def("__call__",
           [](Function& function, const std::vector<Tensor>& inputs) {
             nb::gil_scoped_release released;
             return function(inputs);
           })
      .def_prop_ro("compiles", &Function::compiles);
}

}  // namespace tandem::python
