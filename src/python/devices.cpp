// What tandem.config.list_physical_devices reports: the machine's devices as Tandem's discovery
// finds them (the same as `tandem devices`), each as TensorFlow names it.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdio>
#include <span>

#include "ops/backend.h"
#include "python/bindings.h"
#include "tandem/distribute.h"
#include "tandem/ops.h"
#include "tandem/random.h"
#include "tandem/runtime.h"

namespace tandem::python {
namespace {

// tf.debugging.set_log_device_placement(True): a line per op run, on the process's stderr as
// TensorFlow logs it ("Executing op matmul in device
// /job:localhost/replica:0/task:0/device:CPU:0").
class PlacementLog final : public OpObserver {
 public:
  void after_op(OpKind kind, std::span<const Tensor>, std::span<const Tensor> outputs,
                const Attrs&) override {
    const Device device = outputs.empty() ? Device::cpu() : outputs.front().device();
    const char* tf_kind = device.type == DeviceType::cpu    ? "CPU"
                          : device.type == DeviceType::cuda ? "GPU"
                                                            : "XLA";
    std::fprintf(stderr, "Executing op %s in device /job:localhost/replica:0/task:0/device:%s:%d\n",
                 op_name(kind), tf_kind, device.index);
  }
};

}  // namespace

void bind_devices(nb::module_& module) {
  // (device_type, details) per device: "CPU", "GPU" (CUDA, usable by Tandem), "TPU".
  module.def("physical_devices", [] {
    nb::list devices;
    const distribute::DeviceInventory inventory = distribute::discover_devices();
    const distribute::CpuInfo cpu = distribute::probe_cpu();
    nb::dict cpu_details;
    cpu_details["device_name"] = cpu.model;
    cpu_details["threads"] = cpu.threads_available;
    devices.append(nb::make_tuple("CPU", cpu_details));
    if (inventory.cuda.usable()) {
      for (const distribute::GpuInfo& gpu : inventory.cuda.gpus) {
        nb::dict details;
        details["device_name"] = gpu.name;
        details["compute_capability"] =
            nb::make_tuple(gpu.compute_capability_major, gpu.compute_capability_minor);
        details["memory_bytes"] = gpu.memory_bytes;
        devices.append(nb::make_tuple("GPU", details));
      }
    }
    if (inventory.tpu.usable()) {
      for (const distribute::TpuChip& chip : inventory.tpu.chips) {
        nb::dict details;
        details["pci_address"] = chip.pci_address;
        devices.append(nb::make_tuple("TPU", details));
      }
    }
    return devices;
  });
  module.def("set_num_threads", &set_num_threads, nb::arg("threads"));
  module.def("num_threads", &num_threads);
  module.def("thread_setting", &thread_setting);
  module.def("set_seed", &manual_seed, nb::arg("seed"));
  module.def(
      "random_uniform",
      [](const std::vector<std::int64_t>& shape, double low, double high,
         const std::string& dtype) {
        return random_uniform(shape, low, high, dtype_from_tf_name(dtype));
      },
      nb::arg("shape"), nb::arg("low"), nb::arg("high"), nb::arg("dtype"));
  module.def(
      "random_normal",
      [](const std::vector<std::int64_t>& shape, double mean, double stddev,
         const std::string& dtype) {
        return random_normal(shape, mean, stddev, dtype_from_tf_name(dtype));
      },
      nb::arg("shape"), nb::arg("mean"), nb::arg("stddev"), nb::arg("dtype"));
  module.def("version", &version);
  module.def("set_log_device_placement", [](bool enabled) {
    static PlacementLog log;
    static bool installed = false;
    if (enabled && !installed) add_op_observer(&log);
    if (!enabled && installed) remove_op_observer(&log);
    installed = enabled;
  });
  module.def("built_with_cuda", [] { return distribute::discover_devices().cuda.backend_built; });
}

}  // namespace tandem::python
