#include "distribute/replication.h"

#include <cstdio>

#include "core/tensor_copy.h"
#include "tandem/autodiff.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"

namespace tandem::distribute::detail {

RunPlan plan_of(const data::Dataset& dataset, int epochs) {
  return {dataset.batch_size(), dataset.num_batches(), dataset.num_examples(), epochs};
}

void ensure_built(nn::Model& model, const Tensor& features) {
  if (model.built()) return;
  const Shape input_shape(features.shape().begin() + 1, features.shape().end());
  model.build(input_shape, features.dtype());
}

void place_weights(const nn::Model& model, Device device) {
  for (Tensor& weight : model.weights()) {
    if (weight.device() != device) weight.set_data(weight.to(device));
  }
}

std::vector<Tensor> moving_statistics(const nn::Model& model) {
  std::vector<Tensor> statistics;
  for (const Tensor& weight : model.non_trainable_weights()) {
    if (is_floating(weight.dtype())) statistics.push_back(weight);
  }
  return statistics;
}

Share share_of(std::int64_t batch, int replicas, int replica) {
  const std::int64_t base = batch / replicas;
  const std::int64_t extra = batch % replicas;
  return {replica * base + std::min<std::int64_t>(replica, extra),
          base + (replica < extra ? 1 : 0)};
}

BucketLayout plan_buckets(const std::vector<Tensor>& variables, std::size_t bucket_bytes) {
  BucketLayout layout;
  std::size_t bytes = 0;
  for (std::size_t i = variables.size(); i-- > 0;) {
    const Tensor& variable = variables[i];
    const bool fits = !layout.buckets.empty() &&
                      variables[layout.buckets.back().front()].dtype() == variable.dtype() &&
                      bytes + variable.nbytes() <= bucket_bytes;
    if (!fits) {
      layout.buckets.emplace_back();
      bytes = 0;
    }
    layout.buckets.back().push_back(i);
    bytes += variable.nbytes();
  }
  return layout;
}

Tensor pack(const std::vector<Tensor>& tensors, const std::vector<Tensor>& like,
            const std::vector<std::size_t>& indices, double weight) {
  NoGradGuard no_grad;
  std::vector<Tensor> parts;
  parts.reserve(indices.size());
  bool shares_storage = false;  // a part is a view of a caller's tensor, not a fresh one
  for (const std::size_t index : indices) {
    const Tensor& model = like[index];
    const Tensor value = weight != 0.0 && index < tensors.size() ? tensors[index] : Tensor();
    if (!value.defined()) {
      parts.push_back(Tensor::zeros({model.numel()}, model.dtype(), model.device()));
    } else {
      const Tensor flat = reshape(value, {value.numel()});  // a view
      shares_storage = weight == 1.0;
      parts.push_back(weight == 1.0 ? flat : flat * weight);
    }
  }
  // The collective reduces the bucket in place, so it must not share a caller's storage.
  if (parts.size() > 1) return concat(parts, 0);
  return shares_storage ? parts.front().clone() : parts.front();
}

std::vector<Tensor> unpack(const Tensor& flat, const std::vector<Tensor>& like,
                           const std::vector<std::size_t>& indices) {
  std::vector<Tensor> views;
  views.reserve(indices.size());
  std::size_t offset = flat.storage_offset();
  for (const std::size_t index : indices) {
    const Tensor& model = like[index];
    views.push_back(Tensor::from_storage(flat.storage(), offset, model.shape(), model.dtype()));
    offset += model.nbytes();
  }
  return views;
}

std::string device_list(const std::vector<Device>& devices) {
  std::string text;
  for (const Device& device : devices)
    text += (text.empty() ? "" : ", ") + device.str();
  return text;
}

std::string digest(const void* data, std::size_t bytes, std::uint64_t seed) {
  std::uint64_t hash = seed;
  const auto* byte = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < bytes; ++i)
    hash = (hash ^ byte[i]) * 0x100000001b3ULL;
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

std::vector<std::pair<std::string, std::string>> describe_run(const nn::Model& model,
                                                              const RunPlan& plan,
                                                              const Tensor& features,
                                                              const Tensor& labels) {
  std::string weights_text;
  std::int64_t parameters = 0;
  for (const Tensor& weight : model.weights()) {
    weights_text += weight.name() + shape_str(weight.shape()) + dtype_name(weight.dtype()) + ";";
    parameters += weight.numel();
  }
  const Tensor host_features = features.to(Device::cpu());
  const Tensor host_labels = labels.to(Device::cpu());
  const std::string batch_digest =
      digest(host_labels.raw_data(), host_labels.nbytes(),
             std::stoull(digest(host_features.raw_data(), host_features.nbytes()), nullptr, 16));
  const train::Optimizer& optimizer = model.optimizer();
  return {
      {"Tandem version", version()},
      {"model", std::to_string(model.weights().size()) + " weights, " + std::to_string(parameters) +
                    " parameters (layout digest " +
                    digest(weights_text.data(), weights_text.size()) + ")"},
      {"optimizer", optimizer.name() + ", learning rate " +
                        std::to_string(optimizer.learning_rate()) + " at step " +
                        std::to_string(optimizer.iterations())},
      {"loss", model.loss().name()},
      {"epochs", std::to_string(plan.epochs)},
      {"global batch size", std::to_string(plan.batch_size)},
      {"batches per epoch", std::to_string(plan.batches_per_epoch)},
      {"examples", std::to_string(plan.examples)},
      {"first batch (data and shuffle order)", "digest " + batch_digest},
  };
}

Tensor replica_rows(const Tensor& batch, const Share& share, Device device) {
  const std::int64_t count = share.count > 0 ? share.count : 1;
  const std::int64_t start = share.count > 0 ? share.start : 0;
  return tandem::detail::rows(batch, start, count).to(device);
}

void OneDeviceDistribution::prepare(nn::Model& model, const data::Dataset&, int) {
  model_ = &model;
}

std::pair<Tensor, Tensor> OneDeviceDistribution::step(
    const Tensor& x, const Tensor& y, const train::Loss&,
    const train::detail::ReplicaStepFn& run_replica) {
  if (model_ != nullptr) {
    ensure_built(*model_, x);
    place_weights(*model_, device_);
    model_ = nullptr;
  }
  LocalReplicaStep local;
  auto [y_pred, loss] = run_replica(x.to(device_), y.to(device_), local);
  return {y_pred.to(Device::cpu()), std::move(loss)};
}

void check_device_exists(Device device, const DeviceInventory& inventory) {
  if (device.type == DeviceType::cpu) {
    if (device.index != 0) {
      throw DeviceUnavailable("cpu:" + std::to_string(device.index) +
                              " does not exist: Tandem sees the CPU as one device, cpu; use "
                              "Device::cpu()");
    }
    return;
  }
  if (device.type == DeviceType::xla) {
    try {
      xla::device_description(device.index);
    } catch (const Error& error) {
      throw DeviceUnavailable(error.what());
    }
    return;
  }
  const CudaInfo& cuda = inventory.cuda;
  if (cuda.gpus.empty()) {
    throw DeviceUnavailable(device.str() + " does not exist: " + cuda.reason +
                            "; train on the CPU instead (strategy cpu or auto)");
  }
  const auto count = static_cast<int>(cuda.gpus.size());
  if (device.index < 0 || device.index >= count) {
    throw DeviceUnavailable(device.str() + " does not exist: this machine has " +
                            std::to_string(count) +
                            (count == 1 ? " GPU, cuda:0" : " GPUs, cuda:0") +
                            (count > 1 ? " to cuda:" + std::to_string(count - 1) : std::string()));
  }
  if (!cuda.backend_available) {
    throw DeviceUnavailable(device.str() + " (" + cuda.gpus[device.index].name +
                            ") cannot be used: " + cuda.backend_reason);
  }
}

DeviceInventory gpu_inventory() {
  DiscoveryOptions options = DiscoveryOptions::from_environment();
  options.nccl_libraries.clear();
  options.cudnn_libraries.clear();
  options.pjrt_plugins.clear();
  options.pci_devices_dir.clear();
  return discover_devices(options);
}

}  // namespace tandem::distribute::detail
