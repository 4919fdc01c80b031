// tf.GradientTape's native half. The library's tape records from its construction on the thread
// that made it, so the Python tape makes it on entering its `with` block; gradients of sources
// the target does not depend on come back as None, as TensorFlow gives them.
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "python/bindings.h"
#include "tandem/autodiff.h"
#include "tandem/error.h"

namespace tandem::python {
namespace {

class PythonTape {
 public:
  PythonTape(bool persistent, bool watch_accessed_variables)
      : persistent_(persistent), watch_accessed_variables_(watch_accessed_variables) {}

  void start() {
    if (tape_) throw InvalidArgument("GradientTape: this tape is recording already");
    tape_ = std::make_unique<GradientTape>(persistent_, watch_accessed_variables_);
  }

  void watch(const Tensor& tensor) { recording("watch").watch(tensor); }

  nb::list gradient(const Tensor& target, const std::vector<Tensor>& sources,
                    const Tensor& output_gradient) {
    GradientTape& tape = recording("gradient");
    std::vector<Tensor> gradients;
    {
      nb::gil_scoped_release released;
      gradients = tape.gradient(target, sources, output_gradient);
    }
    if (!persistent_) tape_.reset();  // a non-persistent tape gives its gradients once
    nb::list result;
    for (const Tensor& gradient : gradients)
      result.append(gradient.defined() ? nb::cast(gradient) : nb::none());
    return result;
  }

  void release() { tape_.reset(); }

 private:
  GradientTape& recording(const char* method) {
    if (!tape_) {
      throw InvalidArgument(
          std::string("GradientTape.") + method +
          ": the tape holds no record (use it inside `with tf.GradientTape() as tape:`; a "
          "tape that is not persistent gives gradients once: pass persistent=True for more)");
    }
    return *tape_;
  }

  bool persistent_;
  bool watch_accessed_variables_;
  std::unique_ptr<GradientTape> tape_;
};

}  // namespace

void bind_autodiff(nb::module_& module) {
  nb::class_<PythonTape>(module, "GradientTape")
      .def(nb::init<bool, bool>(), nb::arg("persistent"), nb::arg("watch_accessed_variables"))
      .def("start", &PythonTape::start)
      .def("watch", &PythonTape::watch)
      .def("gradient", &PythonTape::gradient, nb::arg("target"), nb::arg("sources"),
           nb::arg("output_gradient"))
      .def("release", &PythonTape::release);
  module.def("stop_recording", [] { return std::make_unique<NoGradGuard>(); });
  nb::class_<NoGradGuard>(module, "NoGradGuard");
}

}  // namespace tandem::python
