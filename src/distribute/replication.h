#pragma once
// What every strategy does the same way: building the model before the first step, putting its
// weights on a device, cutting a global batch into replica shares, packing gradients into flat
// buckets for a collective and unpacking the result, and describing a run so that workers can
// check they agree.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tandem/data.h"
#include "tandem/distribute.h"
#include "tandem/nn.h"
#include "tandem/tensor.h"
#include "train/distribution.h"

namespace tandem::distribute::detail {

// What fit is about to run: the dataset's global batches and the epochs.
struct RunPlan {
  std::int64_t batch_size = 0;
  std::int64_t batches_per_epoch = 0;
  std::int64_t examples = 0;
  int epochs = 0;
};
RunPlan plan_of(const data::Dataset& dataset, int epochs);

// Builds a Sequential for inputs like `features` (N, ...) (functional models are built already),
// so its weights exist before the first step and can be placed and broadcast.
void ensure_built(nn::Model& model, const Tensor& features);

// Moves every weight of the model to `device`, keeping the weights' identities.
void place_weights(const nn::Model& model, Device device);

// Floating-point weights that are not trained but change during training (BatchNormalization's
// moving statistics), in the model's order.
std::vector<Tensor> moving_statistics(const nn::Model& model);

// Replica `replica` of `replicas` trains on rows [start, start + count) of a global batch of
// `batch` rows: batch / replicas each, the first batch % replicas replicas one more.
struct Share {
  std::int64_t start = 0;
  std::int64_t count = 0;
};
Share share_of(std::int64_t batch, int replicas, int replica);

// Gradients grouped for all-reducing: each bucket holds variables of one dtype, in the order the
// backward pass finishes them (the model's last weights first), up to about `bucket_bytes`.
struct BucketLayout {
  std::vector<std::vector<std::size_t>> buckets;  // variable indices
};
BucketLayout plan_buckets(const std::vector<Tensor>& variables, std::size_t bucket_bytes);

// One flat tensor (numel,) of `tensors[indices]`, each scaled by `weight` (weight 0 gives zeros,
// so a replica without examples adds nothing); undefined or absent tensors (an empty `tensors`)
// count as zeros shaped like `like[index]`. Runs as ops on the tensors' device, outside any
// tape; the result never shares storage with `tensors`.
Tensor pack(const std::vector<Tensor>& tensors, const std::vector<Tensor>& like,
            const std::vector<std::size_t>& indices, double weight);
// The inverse of pack: views of `flat` shaped like `like[indices]`, in order.
std::vector<Tensor> unpack(const Tensor& flat, const std::vector<Tensor>& like,
                           const std::vector<std::size_t>& indices);

// A replica step that combines nothing: the replica's own gradients are the update.
class LocalReplicaStep final : public train::detail::ReplicaStep {
 public:
  GradientTape::GradientReady gradient_ready() override { return {}; }
  bool reduce(std::vector<Tensor>&, const std::vector<Tensor>&) override { return true; }
};

// Training on one device (OneDevice, and Mirrored over one device): the batch moves there,
// nothing is combined.
class OneDeviceDistribution final : public train::detail::Distribution {
 public:
  explicit OneDeviceDistribution(Device device) : device_(device) {}
  bool is_chief() const override { return true; }
  void prepare(nn::Model& model, const data::Dataset& dataset, int epochs) override;
  std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& y, const train::Loss& loss,
                                 const train::detail::ReplicaStepFn& run_replica) override;
  Device input_device() const override { return device_; }
  bool single_replica() const override { return true; }

 private:
  Device device_;
  nn::Model* model_ = nullptr;  // to set up on the next step; null once done
};

// Throws DeviceUnavailable when `device` does not exist in `inventory` or cannot run Tandem's
// kernels, naming the devices there are.
void check_device_exists(Device device, const DeviceInventory& inventory);

// Discovery of the GPUs alone (no NCCL, cuDNN or PJRT plugin loaded): enough to check devices.
DeviceInventory gpu_inventory();

// What workers must agree on before training together, as (what, value) pairs: the model's
// weights (names, shapes, dtypes), optimizer, loss, epochs, batch size, batches per epoch and a
// digest of the first step's batch (same data in the same shuffle order).
std::vector<std::pair<std::string, std::string>> describe_run(const nn::Model& model,
                                                              const RunPlan& plan,
                                                              const Tensor& features,
                                                              const Tensor& labels);

// "cuda:0, cuda:1"
std::string device_list(const std::vector<Device>& devices);

// A 64-bit FNV-1a digest of bytes, as 16 hex digits.
std::string digest(const void* data, std::size_t bytes, std::uint64_t seed = 0xcbf29ce484222325ULL);

// The replica's rows of a global batch, moved to its device; a replica without rows gets the
// first row instead (its gradient is weighted by 0, so it adds nothing).
Tensor replica_rows(const Tensor& batch, const Share& share, Device device);

}  // namespace tandem::distribute::detail
