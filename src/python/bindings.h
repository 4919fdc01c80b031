#pragma once
// The native module of the Python package (`tandem._native`), one binding function per part.
// The pure-Python layer (python/tandem/) gives these TensorFlow's names; logic lives here or
// below, in the library.
#include <nanobind/nanobind.h>

#include <memory>
#include <string>

#include "tandem/dtype.h"

namespace tandem::python {

namespace nb = nanobind;

void bind_errors(nb::module_& module);
void bind_tensor(nb::module_& module);
void bind_ops(nb::module_& module);
void bind_data(nb::module_& module);
void bind_autodiff(nb::module_& module);
void bind_models(nb::module_& module);
void bind_devices(nb::module_& module);
void bind_distribute(nb::module_& module);
void bind_bench(nb::module_& module);
void bind_function(nb::module_& module);
void bind_io_image(nb::module_& module);

// A Python object for C++ code that may drop it on any thread (a pipeline's, a compiled step's):
// the reference is released under the GIL.
std::shared_ptr<nb::object> held_under_gil(nb::object object);

// TensorFlow's (and numpy's) name of a dtype: "float32", "bfloat16", "int64", "bool".
const char* tf_dtype_name(DType dtype);
// The dtype a TensorFlow or numpy name stands for; an InvalidArgument names the unknown one.
DType dtype_from_tf_name(const std::string& name);

}  // namespace tandem::python
