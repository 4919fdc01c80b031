// The op table's functional API for Python (tandem.math, tandem.nn, the operators of
// tandem.Tensor): each op once, under its library name; python/tandem/ gives TensorFlow's names.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "python/bindings.h"
#include "tandem/nn.h"
#include "tandem/ops.h"

namespace tandem::python {

void bind_ops(nb::module_& module) {
  nb::module_ ops = module.def_submodule("ops", "Tandem's ops, run eagerly.");
  using Unary = Tensor (*)(const Tensor&);
  using Binary = Tensor (*)(const Tensor&, const Tensor&);
  for (const auto& [name, op] : {std::pair<const char*, Unary>{"neg", &neg},
                                 {"abs", &tandem::abs},
                                 {"sign", &sign},
                                 {"exp", &tandem::exp},
                                 {"log", &tandem::log},
                                 {"sqrt", &tandem::sqrt},
                                 {"rsqrt", &rsqrt},
                                 {"square", &square},
                                 {"relu", &relu},
                                 {"sigmoid", &sigmoid},
                                 {"tanh", &tandem::tanh}}) {
    ops.def(name, op, nb::arg("x"));
  }
  for (const auto& [name, op] : {std::pair<const char*, Binary>{"add", &add},
                                 {"sub", &sub},
                                 {"mul", &mul},
                                 {"div", &div},
                                 {"maximum", &maximum},
                                 {"minimum", &minimum},
                                 {"pow", &tandem::pow},
                                 {"equal", &equal},
                                 {"greater", &greater},
                                 {"greater_equal", &greater_equal},
                                 {"less", &less}}) {
    ops.def(name, op, nb::arg("a"), nb::arg("b"));
  }
  ops.def("gelu", &gelu, nb::arg("x"), nb::arg("approximate") = false);
  // Keras' activations by name (tandem/nn.h), as layers apply them.
  ops.def(
      "activation",
      [](const std::string& name, const Tensor& x) {
        return nn::apply_activation(nn::parse_activation(name), x);
      },
      nb::arg("name"), nb::arg("x"));
  ops.def("scalar_like", &scalar_like, nb::arg("x"), nb::arg("value"));
  ops.def("where", &where, nb::arg("condition"), nb::arg("a"), nb::arg("b"));
  ops.def("sum", &sum, nb::arg("x"), nb::arg("axes"), nb::arg("keepdims"));
  ops.def("mean", &mean, nb::arg("x"), nb::arg("axes"), nb::arg("keepdims"));
  ops.def("max", &reduce_max, nb::arg("x"), nb::arg("axes"), nb::arg("keepdims"));
  ops.def("argmax", &argmax, nb::arg("x"), nb::arg("axis"));
  ops.def("broadcast_to", &broadcast_to, nb::arg("x"), nb::arg("shape"));
  ops.def("matmul", nb::overload_cast<const Tensor&, const Tensor&, bool, bool>(&matmul),
          nb::arg("a"), nb::arg("b"), nb::arg("transpose_a"), nb::arg("transpose_b"));
  ops.def("softmax", &softmax, nb::arg("x"), nb::arg("axis"));
  ops.def("log_softmax", &log_softmax, nb::arg("x"), nb::arg("axis"));
  ops.def("reshape", &reshape, nb::arg("x"), nb::arg("shape"));
  ops.def("transpose", &transpose, nb::arg("x"), nb::arg("permutation"));
  ops.def("concat", &concat, nb::arg("xs"), nb::arg("axis"));
  ops.def("slice", &slice, nb::arg("x"), nb::arg("begin"), nb::arg("size"));
  ops.def(
      "cast",
      [](const Tensor& x, const std::string& dtype) { return cast(x, dtype_from_tf_name(dtype)); },
      nb::arg("x"), nb::arg("dtype"));
}

}  // namespace tandem::python
