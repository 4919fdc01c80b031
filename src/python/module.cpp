// tandem._native: the C++ half of `import tandem as tf`.
#include "python/bindings.h"

namespace tandem::python {

std::shared_ptr<nb::object> held_under_gil(nb::object object) {
  return std::shared_ptr<nb::object>(new nb::object(std::move(object)), [](nb::object* held) {
    nb::gil_scoped_acquire gil;
    delete held;
  });
}

}  // namespace tandem::python

NB_MODULE(_native, module) {
  module.doc() = "Tandem's native module; import tandem (python/tandem/) instead.";
  // nanobind lists the instances still alive when the interpreter exits (a notebook's model, a
  // tensor in a global); those are not leaks, and the list would end every user's script. Memory
  // is checked by tests/python (RSS flat over 200 fits).
  nanobind::set_leak_warnings(false);
  tandem::python::bind_errors(module);
  tandem::python::bind_tensor(module);
  tandem::python::bind_ops(module);
  tandem::python::bind_data(module);
  tandem::python::bind_autodiff(module);
  tandem::python::bind_models(module);
  tandem::python::bind_devices(module);
  tandem::python::bind_distribute(module);
  tandem::python::bind_bench(module);
  tandem::python::bind_function(module);
  tandem::python::bind_io_image(module);
}
