#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/allocator.h"
#include "ops/backend.h"
#include "ops/trace_hook.h"
#include "tandem/runtime.h"

namespace tandem {
namespace {

// One slot per device type: what its backend registered, and the backend once it is up. Read on
// every op, so the backend pointer is an atomic that needs no lock.
struct BackendSlot {
  std::atomic<BackendBringUp> bring_up{nullptr};
  std::atomic<KernelFactsFn> kernel_facts{nullptr};
  std::atomic<Backend*> backend{nullptr};
};

std::array<BackendSlot, kNumDeviceTypes>& backend_slots() {
  static std::array<BackendSlot, kNumDeviceTypes> slots;
  return slots;
}

BackendSlot& slot_of(DeviceType type) {
  return backend_slots()[static_cast<std::size_t>(type)];
}

// Core runs this once per device type (under its lock) on the type's first use, so a tensor
// placed on a device and an op dispatched there bring it up the same way.
std::string bring_up_registered_backend(DeviceType type) {
  BackendSlot& slot = slot_of(type);
  const BackendBringUp bring_up = slot.bring_up.load();
  if (bring_up == nullptr) {
    return std::string("this build of Tandem has no backend for ") + device_type_name(type) +
           " devices";
  }
  std::string why_not;
  Backend* backend = bring_up(why_not);
  if (backend == nullptr) return why_not.empty() ? "its backend did not come up" : why_not;
  slot.backend.store(backend);
  return "";
}

using ObserverList = std::vector<OpObserver*>;
std::atomic<std::shared_ptr<const ObserverList>>& observers() {
  static std::atomic<std::shared_ptr<const ObserverList>> list{std::make_shared<ObserverList>()};
  return list;
}
std::mutex& observers_mutex() {
  static std::mutex mutex;
  return mutex;
}

std::string describe_inputs(const std::vector<Tensor>& inputs) {
  std::string text;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (i) text += ", ";
    text += inputs[i].defined()
                ? shape_str(inputs[i].shape()) + " " + dtype_name(inputs[i].dtype()) + " on " +
                      inputs[i].device().str()
                : "undefined";
  }
  return text;
}

}  // namespace

BackendRegistration::BackendRegistration(DeviceType type, BackendBringUp bring_up,
                                         KernelFactsFn kernel_facts) {
  BackendSlot& slot = slot_of(type);
  TANDEM_ASSERT(slot.bring_up.load() == nullptr,
                std::string("two backends registered for ") + device_type_name(type) + " devices");
  slot.kernel_facts.store(kernel_facts);
  slot.bring_up.store(bring_up);
  register_device_bring_up(type, bring_up_registered_backend);
}

Backend& backend_for(Device device) {
  BackendSlot& slot = slot_of(device.type);
  if (Backend* backend = slot.backend.load()) return *backend;
  const std::string why_not = bring_up_device(device.type);
  if (Backend* backend = slot.backend.load()) return *backend;
  throw Error("no backend for device " + device.str() + ": " + why_not +
              "; run `tandem devices` to see what is available");
}

std::vector<Backend*> available_backends() {
  std::vector<Backend*> backends;
  for (int type = 0; type < kNumDeviceTypes; ++type) {
    const auto device_type = static_cast<DeviceType>(type);
    if (slot_of(device_type).bring_up.load() == nullptr) continue;
    if (bring_up_device(device_type).empty())
      backends.push_back(slot_of(device_type).backend.load());
  }
  return backends;
}

const KernelFacts* registered_kernel_facts(DeviceType type, OpKind kind) {
  const KernelFactsFn kernel_facts = slot_of(type).kernel_facts.load();
  return kernel_facts ? kernel_facts(kind) : nullptr;
}

void require_deterministic_kernel(OpKind kind, Device device) {
  if (!deterministic()) return;
  const KernelFacts* facts = registered_kernel_facts(device.type, kind);
  if (facts == nullptr || facts->nondeterministic == nullptr) return;
  throw Error(std::string(op_name(kind)) + " on " + device.str() +
              ": deterministic mode (--deterministic) cannot be honoured there, its " +
              device_type_name(device.type) + " kernel " + facts->nondeterministic +
              " and its results vary from run to run; train on the CPU (--strategy cpu) "
              "for bit-identical runs, or on " +
              device.str() + " without --deterministic");
}

void add_op_observer(OpObserver* observer) {
  std::lock_guard lock(observers_mutex());
  auto updated = std::make_shared<ObserverList>(*observers().load());
  updated->push_back(observer);
  observers().store(std::move(updated));
}

void remove_op_observer(OpObserver* observer) {
  std::lock_guard lock(observers_mutex());
  auto updated = std::make_shared<ObserverList>(*observers().load());
  std::erase(*updated, observer);
  observers().store(std::move(updated));
}

std::shared_ptr<const std::vector<OpObserver*>> current_op_observers() {
  return observers().load();
}

std::vector<Tensor> call_op(OpKind kind, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const OpDef& def = op_def(kind);
  const int count = static_cast<int>(inputs.size());
  if (count < def.min_inputs || (def.max_inputs >= 0 && count > def.max_inputs)) {
    throw InvalidArgument(std::string(def.name) + ": got " + std::to_string(count) +
                          " inputs, expects " + std::to_string(def.min_inputs) +
                          (def.max_inputs == def.min_inputs
                               ? ""
                               : " to " + (def.max_inputs < 0 ? std::string("any number")
                                                              : std::to_string(def.max_inputs))));
  }
  for (int i = 0; i < count; ++i) {
    if (!inputs[i].defined()) {
      throw InvalidArgument(std::string(def.name) + ": input " + std::to_string(i) +
                            " is an undefined tensor");
    }
  }
  if (def.writes_aliased_inputs) {
    for (const int alias : def.output_aliases) {
      // An alias past the inputs given is an optional input left out (SGD's momentum slot).
      if (alias >= 0 && alias < count && inputs[static_cast<std::size_t>(alias)].is_constant()) {
        const std::string& name = inputs[static_cast<std::size_t>(alias)].name();
        throw InvalidArgument(std::string(def.name) + ": writes into input " +
                              std::to_string(alias) + (name.empty() ? "" : " (" + name + ")") +
                              ", a constant (an inference model's weight); make the model again "
                              "from the changed weights");
      }
    }
  }
  const Device device = count > 0 ? inputs[0].device() : Device::cpu();
  for (int i = 1; i < count; ++i) {
    if (inputs[i].device() != device) {
      throw InvalidArgument(std::string(def.name) + ": inputs live on different devices (" +
                            describe_inputs(inputs) + "); move them with .to(device)");
    }
  }

  const std::vector<TensorMeta> input_metas = metas_of(inputs);
  const std::vector<TensorMeta> output_metas = def.infer(def.name, input_metas, attrs);

  Backend& backend = backend_for(device);
  require_deterministic_kernel(kind, device);
  const DType kernel_dtype = count > 0 ? inputs[0].dtype() : output_metas[0].dtype;
  if (!backend.supports(kind, kernel_dtype)) {
    throw Error(std::string(def.name) + ": the " + backend.name() + " backend has no kernel for " +
                dtype_name(kernel_dtype) + " inputs (" + describe_inputs(inputs) +
                "); cast to f32 or run on another device");
  }

  // Traced: the recorder makes symbolic outputs and the kernel runs later, in the graph; the
  // observers (a gradient tape) still see the op, so its backward pass is traced too.
  TraceRecorder* recorder = active_trace_recorder();
  std::vector<Tensor> outputs;
  if (recorder != nullptr) {
    outputs = recorder->record_op(kind, inputs, attrs, output_metas, device);
  } else {
    outputs.reserve(output_metas.size());
    for (std::size_t i = 0; i < output_metas.size(); ++i) {
      const int alias = i < def.output_aliases.size() ? def.output_aliases[i] : -1;
      if (alias >= 0) {
        const Tensor& source = inputs[static_cast<std::size_t>(alias)];
        outputs.push_back(Tensor::from_storage(source.storage(), source.storage_offset(),
                                               output_metas[i].shape, output_metas[i].dtype));
      } else {
        outputs.push_back(Tensor::empty(output_metas[i].shape, output_metas[i].dtype, device));
      }
    }
  }

  const std::shared_ptr<const ObserverList> current_observers = observers().load();
  for (OpObserver* observer : *current_observers)
    observer->before_op(kind, inputs, attrs);
  if (recorder == nullptr) backend.run(KernelContext{kind, inputs, outputs, attrs});
  for (OpObserver* observer : *current_observers)
    observer->after_op(kind, inputs, outputs, attrs);
  return outputs;
}

}  // namespace tandem
