#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>

#include "core/allocator.h"
#include "ops/backend.h"
#include "tandem/runtime.h"

namespace tandem {
namespace {

std::array<Backend*, 2>& backends() {
  static std::array<Backend*, 2> registered{nullptr, nullptr};
  return registered;
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

Backend& backend_for(Device device) {
  if (device.type == DeviceType::cpu) return cpu_backend();
  Backend* backend = backends()[static_cast<std::size_t>(device.type)];
  if (backend == nullptr) {
    device_memory(device.type);  // brings the backend up on first use, or throws why not
    backend = backends()[static_cast<std::size_t>(device.type)];
  }
  if (backend == nullptr) {
    throw Error("no backend for device " + device.str() +
                ": this build or machine has none; run `tandem devices` to see what is available");
  }
  return *backend;
}

void require_deterministic_kernel(OpKind kind, Device device) {
  if (device.type != DeviceType::cuda || !deterministic()) return;
  // The CUDA kernels whose sums depend on the order threads finish in: the pooling backward
  // kernels and scatter-add (src/backend/cuda/pool.cu, gather.cu) and LayerNormalization's
  // gamma and beta gradients (layer_norm.cu) add with atomics; the convolution backward ops run
  // whichever cuDNN algorithm benchmarked fastest, nondeterministic ones included (conv.cpp).
  // The rest (matmul through cuBLASLt, reductions, batch norm, softmax, element-wise, dropout's
  // Philox stream) give the same bits every run.
  const char* why = nullptr;
  switch (kind) {
    case OpKind::max_pool2d_backward:
    case OpKind::avg_pool2d_backward:
    case OpKind::scatter_add:
    case OpKind::layer_norm_backward:
      why = "sums with atomics";
      break;
    case OpKind::conv2d_backward_input:
    case OpKind::conv2d_backward_filter:
      why = "runs the fastest cuDNN algorithm, which may be a nondeterministic one";
      break;
    default:
      return;
  }
  throw Error(std::string(op_name(kind)) + " on " + device.str() +
              ": deterministic mode (--deterministic) cannot be honoured there, its CUDA kernel " +
              why +
              " and its results vary from run to run; train on the CPU (--strategy cpu) "
              "for bit-identical runs, or on the GPU without --deterministic");
}

void register_backend(DeviceType type, Backend* backend) {
  backends()[static_cast<std::size_t>(type)] = backend;
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

  std::vector<Tensor> outputs;
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

  const std::shared_ptr<const ObserverList> current_observers = observers().load();
  for (OpObserver* observer : *current_observers)
    observer->before_op(kind, inputs, attrs);
  backend.run(KernelContext{kind, inputs, outputs, attrs});
  for (OpObserver* observer : *current_observers)
    observer->after_op(kind, inputs, outputs, attrs);
  return outputs;
}

}  // namespace tandem
