// Mirrored: several replicas in one process. The model exists once; each replica keeps its own
// copy of every weight on its device, and the model's weights are bound to one replica's copies
// at a time (Tensor::set_data). Each step runs the replicas in turn on their shares of the global
// batch (on GPUs their kernels overlap, launches being asynchronous), sums their weighted
// gradients across the group, applies the update once on replica 0 and copies the result to the
// other replicas, so every replica holds identical weights.
#include "core/tensor_copy.h"
#include "distribute/collective.h"
#include "distribute/replication.h"
#include "tandem/autodiff.h"
#include "tandem/distribute.h"
#include "tandem/ops.h"
#include "train/distribution.h"

namespace tandem::distribute {
namespace detail {
namespace {

std::vector<std::size_t> all_indices(std::size_t count) {
  std::vector<std::size_t> indices(count);
  for (std::size_t i = 0; i < count; ++i)
    indices[i] = i;
  return indices;
}

// ---- Logical CPU replicas: the group's sums in host memory ----

class HostGroup final : public ReplicaGroup {
 public:
  void all_reduce(const std::vector<Tensor>& flats) override {
    NoGradGuard no_grad;
    Tensor sum = flats.front().clone();
    for (std::size_t k = 1; k < flats.size(); ++k)
      sum = add(sum, flats[k]);
    for (const Tensor& flat : flats)
      tandem::detail::copy_into(flat, sum, "Mirrored all-reduce");
  }
  void broadcast(const std::vector<Tensor>& flats) override {
    for (std::size_t k = 1; k < flats.size(); ++k) {
      tandem::detail::copy_into(flats[k], flats.front(), "Mirrored broadcast");
    }
  }
  std::string name() const override { return "host memory"; }
};

class MirroredDistribution;

// One replica's part of a Mirrored step: its gradients go into the group's flats; the last
// replica's reduce() combines them and lets train_step apply the update on replica 0.
class MirroredReplicaStep final : public train::detail::ReplicaStep {
 public:
  MirroredReplicaStep(MirroredDistribution& owner, std::size_t replica, bool last)
      : owner_(owner), replica_(replica), last_(last) {}
  GradientTape::GradientReady gradient_ready() override { return {}; }
  bool reduce(std::vector<Tensor>& gradients, const std::vector<Tensor>& variables) override;

 private:
  MirroredDistribution& owner_;
  std::size_t replica_;
  bool last_;
};

class MirroredDistribution final : public train::detail::Distribution {
 public:
  MirroredDistribution(std::vector<Device> devices, std::unique_ptr<ReplicaGroup> group)
      : devices_(std::move(devices)), group_(std::move(group)) {}

  bool is_chief() const override { return true; }

  void prepare(nn::Model& model, const data::Dataset&, int) override { model_ = &model; }

  std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& y, const train::Loss& loss,
                                 const train::detail::ReplicaStepFn& run_replica) override {
    if (model_ != nullptr) {
      set_up(*model_, x);
      model_ = nullptr;
    }
    const std::int64_t batch = x.dim(0);
    const auto replicas = static_cast<int>(devices_.size());
    int last_active = 0;
    for (int k = 0; k < replicas; ++k) {
      if (share_of(batch, replicas, k).count > 0) last_active = k;
    }
    std::vector<Tensor> statistics_before;
    for (const Tensor& statistic : statistics_)
      statistics_before.push_back(statistic.clone());
    gradient_flats_.assign(devices_.size(), Tensor());
    weights_of_share_.assign(devices_.size(), 0.0);
    defined_.assign(variables_.size(), false);

    std::vector<Tensor> predictions;
    std::vector<Tensor> statistics_flats(devices_.size());
    for (int k = 0; k < replicas; ++k) {
      const Share share = share_of(batch, replicas, k);
      weights_of_share_[static_cast<std::size_t>(k)] = static_cast<double>(share.count) / batch;
      bind(static_cast<std::size_t>(k));
      if (share.count > 0) {
        const Device device = devices_[static_cast<std::size_t>(k)];
        MirroredReplicaStep replica_step(*this, static_cast<std::size_t>(k), k == last_active);
        auto [y_pred, replica_loss] = run_replica(replica_rows(x, share, device),
                                                  replica_rows(y, share, device), replica_step);
        predictions.push_back(y_pred.to(Device::cpu()));
        // The last replica's step ended with replica 0 bound for the update.
        bind(static_cast<std::size_t>(k));
      }
      // A replica without examples adds zeros (its weight is 0).
      statistics_flats[k] = statistic_deltas(statistics_before, weights_of_share_[k]);
    }
    bind(0);
    combine_statistics(statistics_flats, statistics_before);
    copy_replica_zero_to_others();

    NoGradGuard no_grad;
    const Tensor all_predictions =
        predictions.size() == 1 ? predictions.front() : concat(predictions, 0);  // (B, ...)
    return {all_predictions, loss(y.to(Device::cpu()), all_predictions)};
  }

  Device input_device() const override { return devices_.front(); }

  // Called by each replica's step once its gradients are computed.
  bool take_gradients(std::size_t replica, bool last, std::vector<Tensor>& gradients) {
    for (std::size_t i = 0; i < gradients.size(); ++i)
      defined_[i] = defined_[i] || gradients[i].defined();
    gradient_flats_[replica] =
        pack(gradients, variables_, all_indices(variables_.size()), weights_of_share_[replica]);
    if (!last) return false;
    for (std::size_t k = 0; k < devices_.size(); ++k) {
      if (!gradient_flats_[k].defined()) {
        // A replica after this one has no examples this step: it adds zeros.
        bind(k);
        gradient_flats_[k] = pack({}, variables_, all_indices(variables_.size()), 0.0);
      }
    }
    group_->all_reduce(gradient_flats_);
    const std::vector<Tensor> summed =
        unpack(gradient_flats_.front(), variables_, all_indices(variables_.size()));
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      gradients[i] = defined_[i] ? summed[i] : Tensor();
    }
    bind(0);  // the optimizer updates replica 0's weights
    return true;
  }

 private:
  // The model's weights get a copy on every replica's device, before the first step.
  void set_up(nn::Model& model, const Tensor& x) {
    ensure_built(model, x);
    weights_ = model.weights();
    variables_ = model.trainable_weights();
    statistics_ = moving_statistics(model);
    place_weights(model, devices_.front());
    // Replica 0's copies are the weights' current storage; the others get copies on their device.
    copies_.assign(devices_.size(), {});
    for (const Tensor& weight : weights_) {
      copies_[0].push_back(Tensor::from_storage(weight.storage(), weight.storage_offset(),
                                                weight.shape(), weight.dtype()));
      for (std::size_t k = 1; k < devices_.size(); ++k) {
        copies_[k].push_back(weight.device() == devices_[k] ? weight.clone()
                                                            : weight.to(devices_[k]));
      }
    }
  }

  void bind(std::size_t replica) {
    for (std::size_t j = 0; j < weights_.size(); ++j)
      weights_[j].set_data(copies_[replica][j]);
  }

  // This replica's change to the moving statistics since the step began, weighted (on its device).
  Tensor statistic_deltas(const std::vector<Tensor>& before, double weight) {
    if (statistics_.empty()) return Tensor();
    NoGradGuard no_grad;
    std::vector<Tensor> deltas;
    for (std::size_t j = 0; j < statistics_.size(); ++j) {
      deltas.push_back(sub(statistics_[j], before[j].to(statistics_[j].device())));
    }
    return pack(deltas, statistics_, all_indices(statistics_.size()), weight);
  }

  void combine_statistics(const std::vector<Tensor>& flats, const std::vector<Tensor>& before) {
    if (statistics_.empty()) return;
    group_->all_reduce(flats);
    NoGradGuard no_grad;
    const std::vector<Tensor> deltas =
        unpack(flats.front(), statistics_, all_indices(statistics_.size()));
    for (std::size_t j = 0; j < statistics_.size(); ++j) {
      tandem::detail::copy_into(statistics_[j], add(before[j], deltas[j]),
                                "Mirrored: averaging " + statistics_[j].name());
    }
  }

  void copy_replica_zero_to_others() {
    if (devices_.size() == 1) return;
    std::vector<Tensor> flats;
    const std::vector<std::size_t> indices = all_indices(weights_.size());
    for (const auto& copies : copies_)
      flats.push_back(pack(copies, copies, indices, 1.0));
    group_->broadcast(flats);
    for (std::size_t k = 1; k < copies_.size(); ++k) {
      const std::vector<Tensor> values = unpack(flats[k], copies_[k], indices);
      for (std::size_t j = 0; j < values.size(); ++j) {
        tandem::detail::copy_into(copies_[k][j], values[j], "Mirrored: replica weights");
      }
    }
  }

  std::vector<Device> devices_;
  std::unique_ptr<ReplicaGroup> group_;
  nn::Model* model_ = nullptr;               // to set up on the next step; null once done
  std::vector<Tensor> weights_;              // the model's weights, bound to one replica at a time
  std::vector<Tensor> variables_;            // its trainable weights
  std::vector<Tensor> statistics_;           // its moving statistics
  std::vector<std::vector<Tensor>> copies_;  // [replica][weight]: each replica's storage
  std::vector<Tensor> gradient_flats_;       // this step's weighted gradients, per replica
  std::vector<double> weights_of_share_;     // b_k / B
  std::vector<bool> defined_;                // gradients some replica produced
};

bool MirroredReplicaStep::reduce(std::vector<Tensor>& gradients, const std::vector<Tensor>&) {
  return owner_.take_gradients(replica_, last_, gradients);
}

}  // namespace

std::unique_ptr<ReplicaGroup> make_host_group() {
  return std::make_unique<HostGroup>();
}

}  // namespace detail

Mirrored::Mirrored() : Mirrored({}, detail::gpu_inventory()) {}

Mirrored::Mirrored(std::vector<Device> devices)
    : Mirrored(std::move(devices), detail::gpu_inventory()) {}

Mirrored::Mirrored(std::vector<Device> devices, const DeviceInventory& inventory) {
  if (devices.empty()) {
    // Every usable GPU, or the CPU when there is none.
    if (inventory.cuda.usable()) {
      for (const GpuInfo& gpu : inventory.cuda.gpus)
        devices.push_back(Device::cuda(gpu.index));
    } else {
      devices.push_back(Device::cpu());
    }
  }
  bool any_cpu = false;
  bool any_gpu = false;
  for (std::size_t k = 0; k < devices.size(); ++k) {
    detail::check_device_exists(devices[k], inventory);
    any_cpu = any_cpu || devices[k].type == DeviceType::cpu;
    any_gpu = any_gpu || devices[k].type == DeviceType::cuda;
    for (std::size_t other = 0; other < k; ++other) {
      if (devices[k].type == DeviceType::cuda && devices[k] == devices[other]) {
        throw InvalidArgument("Mirrored: " + devices[k].str() +
                              " is listed twice; give each GPU once");
      }
    }
  }
  if (any_cpu && any_gpu) {
    throw InvalidArgument(
        "Mirrored: replicas on the CPU and on GPUs cannot be mixed; give only "
        "GPUs, or only the CPU");
  }
  if (devices.size() == 1) {
    initialize(std::make_shared<detail::OneDeviceDistribution>(devices.front()), devices, 1, 0);
    return;
  }
  std::unique_ptr<detail::ReplicaGroup> group =
      any_gpu ? detail::make_nccl_group(devices) : detail::make_host_group();
  auto distribution = std::make_shared<detail::MirroredDistribution>(devices, std::move(group));
  initialize(std::move(distribution), devices, 1, 0);
}

std::string Mirrored::description() const {
  return "Mirrored(" + detail::device_list(devices()) + ")";
}

}  // namespace tandem::distribute
