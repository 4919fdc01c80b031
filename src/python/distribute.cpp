// tf.distribute's native half: strategies by name (distribute::make_strategy, as runs name
// them), their scope, and auto-selection with its reasons.
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <sstream>

#include "python/bindings.h"
#include "tandem/distribute.h"

namespace tandem::python {

void bind_distribute(nb::module_& module) {
  nb::class_<distribute::StrategyScope>(module, "StrategyScope");
  nb::class_<distribute::Strategy>(module, "Strategy")
      .def_prop_ro("description", &distribute::Strategy::description)
      .def_prop_ro("num_replicas_in_sync", &distribute::Strategy::num_replicas_in_sync)
      .def_prop_ro("devices",
                   [](const distribute::Strategy& strategy) {
                     std::vector<std::string> names;
                     for (const Device& device : strategy.devices())
                       names.push_back(device.str());
                     return names;
                   })
      .def("scope", [](const distribute::Strategy& strategy) {
        return std::make_unique<distribute::StrategyScope>(strategy.scope());
      });
  module.def(
      "make_strategy",
      [](const std::string& name) {
        distribute::StrategyOptions options;
        options.name = name;
        return distribute::make_strategy(options);
      },
      nb::arg("name"));
  // Why no TPU can be used here (empty when one can): TPUClusterResolver raises it.
  module.def("tpu_unavailable_reason", [] {
    const distribute::TpuInfo tpu = distribute::discover_tpu();
    return tpu.usable() ? std::string() : tpu.reason;
  });
}

}  // namespace tandem::python
