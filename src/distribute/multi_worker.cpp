// MultiWorker: one replica per process, started by mpirun or `tandem launch`. Gradients are
// all-reduced in buckets that start while the backward pass is still running: the tape hands
// over each gradient as soon as it is final, a bucket starts once all of its gradients are in,
// and the optimizer waits only for what is still in flight.
#include <algorithm>
#include <chrono>
#include <list>
#include <thread>

#include "core/tensor_copy.h"
#include "distribute/collective.h"
#include "distribute/mpi_world.h"
#include "distribute/replication.h"
#include "ops/backend.h"
#include "tandem/autodiff.h"
#include "tandem/distribute.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"
#include "train/distribution.h"

namespace tandem::distribute {
namespace detail {
namespace {

// Adds the seconds from construction to destruction to a counter.
class Stopwatch {
 public:
  explicit Stopwatch(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  Stopwatch(const Stopwatch&) = delete;
  Stopwatch& operator=(const Stopwatch&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

// ---- MPI all-reduce of CPU tensors ----

class MpiCollective final : public Collective {
 public:
  explicit MpiCollective(MpiWorld& world) : world_(world) {}

  std::function<bool()> start_all_reduce(const Tensor& flat) override {
    if (flat.device().type != DeviceType::cpu) {
      throw Error("internal error: the MPI all-reduce got a tensor on " + flat.device().str());
    }
    MPI_Datatype type = MPI_DATATYPE_NULL;
    if (flat.dtype() == DType::f32) type = MPI_FLOAT;
    if (flat.dtype() == DType::f64) type = MPI_DOUBLE;
    if (type == MPI_DATATYPE_NULL) {
      throw InvalidArgument(std::string("MultiWorker on the CPU all-reduces float32 and float64 "
                                        "gradients; these are ") +
                            dtype_name(flat.dtype()) +
                            " (keep the variables in float32: mixed precision does)");
    }
    auto pending = std::make_shared<Pending>(flat);
    const int result = MPI_Iallreduce(MPI_IN_PLACE, flat.raw_data(), static_cast<int>(flat.numel()),
                                      type, MPI_SUM, world_.data_communicator(), &pending->request);
    if (result != MPI_SUCCESS) {
      throw Error(world_.label() + ": MPI_Iallreduce failed (error " + std::to_string(result) +
                  ")");
    }
    outstanding_.push_back(pending);
    return [this, pending] { return test(*pending); };
  }

  void progress() override {
    for (const auto& pending : outstanding_)
      test(*pending);
    outstanding_.remove_if([](const auto& pending) { return pending->done; });
  }

  std::string name() const override { return "MPI"; }

 private:
  struct Pending {
    explicit Pending(Tensor buffer) : flat(std::move(buffer)) {}
    Tensor flat;  // kept alive until MPI is done with it
    MPI_Request request = MPI_REQUEST_NULL;
    bool done = false;
  };

  bool test(Pending& pending) {
    if (pending.done) return true;
    int done = 0;
    const int result = MPI_Test(&pending.request, &done, MPI_STATUS_IGNORE);
    if (result != MPI_SUCCESS) {
      world_.fail("a gradient all-reduce (MPI error " + std::to_string(result) + ")", 0.0);
    }
    pending.done = done != 0;
    return pending.done;
  }

  MpiWorld& world_;
  std::list<std::shared_ptr<Pending>> outstanding_;
};

// ---- One step's gradients, all-reduced bucket by bucket as the backward pass finishes them ----

class BucketedReduction final : public train::detail::ReplicaStep {
 public:
  struct Context {
    MpiWorld& world;
    Collective& collective;
    const BucketLayout& layout;
    const std::vector<Tensor>& variables;
    const std::vector<Tensor>& statistics;  // moving statistics, averaged with the gradients
    double timeout_seconds;
    CommunicationStats& stats;
  };

  // weight: this worker's share of the global batch; statistics_before: the statistics' values
  // before this step's forward pass (the same on every worker).
  BucketedReduction(const Context& context, double weight, std::vector<Tensor> statistics_before,
                    std::string step_name)
      : context_(context),
        weight_(weight),
        statistics_before_(std::move(statistics_before)),
        step_name_(std::move(step_name)),
        gradients_(context.variables.size()),
        arrived_(context.variables.size(), false),
        flats_(context.layout.buckets.size()),
        pending_(context.layout.buckets.size()) {}

  GradientTape::GradientReady gradient_ready() override {
    return [this](std::size_t index, const Tensor& gradient) { arrive(index, gradient); };
  }

  bool reduce(std::vector<Tensor>& gradients, const std::vector<Tensor>& variables) override {
    TANDEM_ASSERT(variables.size() == context_.variables.size(),
                  "the step's variables differ from those the strategy prepared");
    // The backward pass is over: a bucket still to start no longer overlaps it.
    backward_over_ = true;
    for (std::size_t i = 0; i < gradients.size(); ++i) {
      if (!arrived_[i]) arrive(i, gradients[i]);
    }
    const double timeout = context_.timeout_seconds;
    CommunicationStats& stats = context_.stats;
    if (statistics_pending_) {
      const Stopwatch waiting(stats.wait_seconds);
      context_.world.wait(statistics_pending_, timeout,
                          "the statistics all-reduce of " + step_name_);
    }
    for (std::size_t bucket = 0; bucket < pending_.size(); ++bucket) {
      {
        const Stopwatch waiting(stats.wait_seconds);
        context_.world.wait(pending_[bucket], timeout,
                            "the gradient all-reduce (bucket " + std::to_string(bucket + 1) +
                                " of " + std::to_string(pending_.size()) + ") of " + step_name_);
      }
      const Stopwatch unpacking(stats.pack_seconds);
      const std::vector<std::size_t>& indices = context_.layout.buckets[bucket];
      const std::vector<Tensor> views = unpack(flats_[bucket], context_.variables, indices);
      for (std::size_t k = 0; k < indices.size(); ++k) {
        // A variable the loss does not reach has no gradient on any worker: it stays without one.
        gradients[indices[k]] = gradients_[indices[k]].defined() ? views[k] : Tensor();
      }
    }
    const Stopwatch averaging(stats.pack_seconds);
    apply_statistics();
    return true;
  }

 private:
  void arrive(std::size_t index, const Tensor& gradient) {
    gradients_[index] = gradient;
    if (!arrived_[index]) ++arrived_count_;
    arrived_[index] = true;
    // The forward pass is over once the first gradient arrives: the statistics are final.
    if (!statistics_started_) start_statistics();
    launch_ready_buckets();
    context_.collective.progress();
  }

  // Buckets start in layout order, the same on every worker, as MPI requires.
  void launch_ready_buckets() {
    const auto& buckets = context_.layout.buckets;
    while (next_bucket_ < buckets.size()) {
      const std::vector<std::size_t>& indices = buckets[next_bucket_];
      if (!std::all_of(indices.begin(), indices.end(),
                       [&](std::size_t i) { return arrived_[i]; })) {
        return;
      }
      const Stopwatch packing(context_.stats.pack_seconds);
      flats_[next_bucket_] = pack(gradients_, context_.variables, indices, weight_);
      pending_[next_bucket_] = context_.collective.start_all_reduce(flats_[next_bucket_]);
      ++context_.stats.collectives;
      ++context_.stats.gradient_buckets;
      // Other gradients still to come: the backward pass goes on while this bucket travels.
      if (!backward_over_ && arrived_count_ < arrived_.size()) ++context_.stats.overlapped_buckets;
      context_.stats.bytes += static_cast<std::int64_t>(flats_[next_bucket_].nbytes());
      ++next_bucket_;
    }
  }

  // Each worker's change to the statistics, weighted like its gradients; frozen weights change by
  // exactly zero, so they stay bit-identical.
  void start_statistics() {
    statistics_started_ = true;
    const std::vector<Tensor>& statistics = context_.statistics;
    if (statistics.empty()) return;
    const Stopwatch packing(context_.stats.pack_seconds);
    NoGradGuard no_grad;
    std::vector<Tensor> deltas;
    std::vector<std::size_t> indices;
    for (std::size_t j = 0; j < statistics.size(); ++j) {
      deltas.push_back(sub(statistics[j], statistics_before_[j]));
      indices.push_back(j);
    }
    statistics_flat_ = pack(deltas, statistics, indices, weight_);
    statistics_pending_ = context_.collective.start_all_reduce(statistics_flat_);
    ++context_.stats.collectives;
    context_.stats.bytes += static_cast<std::int64_t>(statistics_flat_.nbytes());
  }

  void apply_statistics() {
    const std::vector<Tensor>& statistics = context_.statistics;
    if (statistics.empty()) return;
    NoGradGuard no_grad;
    std::vector<std::size_t> indices(statistics.size());
    for (std::size_t j = 0; j < indices.size(); ++j)
      indices[j] = j;
    const std::vector<Tensor> deltas = unpack(statistics_flat_, statistics, indices);
    for (std::size_t j = 0; j < statistics.size(); ++j) {
      tandem::detail::copy_into(statistics[j], add(statistics_before_[j], deltas[j]),
                                "MultiWorker: averaging " + statistics[j].name());
    }
  }

  const Context& context_;
  double weight_;
  std::vector<Tensor> statistics_before_;
  std::string step_name_;
  std::vector<Tensor> gradients_;
  std::vector<bool> arrived_;
  std::size_t arrived_count_ = 0;
  bool backward_over_ = false;  // reduce() was called: the tape has handed over every gradient
  std::vector<Tensor> flats_;
  std::vector<std::function<bool()>> pending_;
  std::size_t next_bucket_ = 0;
  bool statistics_started_ = false;
  Tensor statistics_flat_;
  std::function<bool()> statistics_pending_;
};

// MPI moves a non-blocking collective on only while the process is inside an MPI call. This
// observer lets the started all-reduces advance after every op the training thread runs, so the
// backward pass's long convolutions hide the transfer instead of holding it up.
class ProgressAfterEveryOp final : public OpObserver {
 public:
  explicit ProgressAfterEveryOp(Collective& collective)
      : collective_(collective), training_thread_(std::this_thread::get_id()) {}
  void after_op(OpKind, std::span<const Tensor>, std::span<const Tensor>, const Attrs&) override {
    // MPI is used from the thread that trains only (MPI_THREAD_FUNNELED); input pipeline threads
    // run ops too.
    if (std::this_thread::get_id() == training_thread_) collective_.progress();
  }

 private:
  Collective& collective_;
  std::thread::id training_thread_;
};

}  // namespace

class MultiWorkerDistribution final : public train::detail::Distribution {
 public:
  MultiWorkerDistribution(MpiWorld& world, Device device, std::unique_ptr<Collective> collective,
                          const MultiWorkerOptions& options)
      : world_(world),
        device_(device),
        collective_(std::move(collective)),
        options_(options),
        progress_(*collective_) {
    add_op_observer(&progress_);
  }

  ~MultiWorkerDistribution() override {
    remove_op_observer(&progress_);
    world_.leave();
  }

  bool is_chief() const override { return world_.rank() == 0; }

  void prepare(nn::Model& model, const data::Dataset& dataset, int epochs) override {
    model_ = &model;
    plan_ = plan_of(dataset, epochs);
  }

  std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& y, const train::Loss& loss,
                                 const train::detail::ReplicaStepFn& run_replica) override {
    if (model_ != nullptr) {
      set_up(*model_, x, y);
      model_ = nullptr;
    }
    ++steps_;
    ++stats_.steps;
    const std::int64_t batch = x.dim(0);
    const Share share = share_of(batch, world_.size(), world_.rank());
    std::vector<Tensor> statistics_before;
    {
      const Stopwatch copying(stats_.pack_seconds);
      for (const Tensor& statistic : statistics_)
        statistics_before.push_back(statistic.clone());
    }
    const BucketedReduction::Context context{
        world_, *collective_, layout_, variables_, statistics_, options_.collective_timeout_seconds,
        stats_};
    BucketedReduction reduction(context, static_cast<double>(share.count) / batch,
                                std::move(statistics_before), "step " + std::to_string(steps_));
    auto [y_pred, replica_loss] =
        run_replica(replica_rows(x, share, device_), replica_rows(y, share, device_), reduction);
    if (world_.size() == 1) return {y_pred.to(Device::cpu()), std::move(replica_loss)};
    const Tensor predictions = gather_predictions(y_pred, share, batch);  // (B, ...)
    NoGradGuard no_grad;
    return {predictions, loss(y.to(Device::cpu()), predictions)};
  }

  Device input_device() const override { return device_; }

  const CommunicationStats& stats() const { return stats_; }

 private:
  // Before the first step: the model built and on this worker's device, the settings checked
  // against rank 0's, and rank 0's weights everywhere.
  void set_up(nn::Model& model, const Tensor& x, const Tensor& y) {
    ensure_built(model, x);
    place_weights(model, device_);
    variables_ = model.trainable_weights();
    statistics_ = moving_statistics(model);
    layout_ = plan_buckets(variables_, options_.bucket_bytes);
    auto settings = describe_run(model, plan_, x, y);
    settings.emplace_back("gradient bucket size", std::to_string(options_.bucket_bytes) + " bytes");
    world_.agree(settings, options_.collective_timeout_seconds, "the start of training");
    broadcast_weights(model.weights());
    steps_ = 0;
  }

  // Every worker's predictions for its share, in batch order, so the loss and metrics of the
  // logs cover the whole global batch.
  Tensor gather_predictions(const Tensor& y_pred, const Share& share, std::int64_t batch) {
    const Tensor local = tandem::detail::rows(y_pred.to(Device::cpu()), 0, share.count).clone();
    const std::size_t row_bytes =
        y_pred.dim(0) > 0 ? y_pred.nbytes() / static_cast<std::size_t>(y_pred.dim(0)) : 0;
    std::vector<std::size_t> bytes_per_rank;
    for (int rank = 0; rank < world_.size(); ++rank) {
      bytes_per_rank.push_back(
          static_cast<std::size_t>(share_of(batch, world_.size(), rank).count) * row_bytes);
    }
    ++stats_.collectives;
    stats_.bytes += static_cast<std::int64_t>(local.nbytes());
    const Stopwatch waiting(stats_.wait_seconds);
    const std::vector<unsigned char> gathered =
        world_.all_gather(local.raw_data(), bytes_per_rank, options_.collective_timeout_seconds,
                          "the gathering of step " + std::to_string(steps_) + "'s predictions");
    Shape shape = y_pred.shape();
    shape[0] = batch;
    Tensor predictions = Tensor::empty(shape, y_pred.dtype(), Device::cpu());
    std::copy(gathered.begin(), gathered.end(),
              static_cast<unsigned char*>(predictions.raw_data()));
    return predictions;
  }

  // Rank 0's weights on every worker, received in place (through a host copy on a GPU).
  void broadcast_weights(const std::vector<Tensor>& weights) {
    if (world_.size() == 1) return;
    for (const Tensor& weight : weights) {
      const Tensor host = weight.to(Device::cpu());
      world_.broadcast(host.raw_data(), host.nbytes(), options_.collective_timeout_seconds,
                       "the broadcast of rank 0's initial weights");
      if (host.raw_data() != weight.raw_data()) {
        tandem::detail::copy_into(weight, host, "MultiWorker: rank 0's weights");
      }
    }
  }

  MpiWorld& world_;
  Device device_;
  std::unique_ptr<Collective> collective_;
  MultiWorkerOptions options_;
  nn::Model* model_ = nullptr;  // to set up on the next step; null once done
  RunPlan plan_;
  std::vector<Tensor> variables_;
  std::vector<Tensor> statistics_;
  BucketLayout layout_;
  std::int64_t steps_ = 0;
  CommunicationStats stats_;
  ProgressAfterEveryOp progress_;
};

std::unique_ptr<Collective> make_mpi_collective(MpiWorld& world) {
  return std::make_unique<MpiCollective>(world);
}

}  // namespace detail

MultiWorker::MultiWorker(const MultiWorkerOptions& options)
    : MultiWorker(options, options.cpu_only ? DeviceInventory{} : detail::gpu_inventory()) {}

MultiWorker::MultiWorker(const MultiWorkerOptions& options, const DeviceInventory& inventory) {
  if (!(options.join_timeout_seconds > 0) || !(options.collective_timeout_seconds > 0)) {
    throw InvalidArgument("MultiWorker: the join and collective timeouts must be positive");
  }
  detail::MpiWorld& world = detail::MpiWorld::join(options.join_timeout_seconds);
  struct Leave {
    detail::MpiWorld& world;
    bool armed = true;
    ~Leave() {
      if (armed) world.leave();
    }
  } leave_on_error{world};

  const bool on_gpu = !options.cpu_only && inventory.cuda.usable();
  const Device device =
      on_gpu ? Device::cuda(world.local_rank() % static_cast<int>(inventory.cuda.gpus.size()))
             : Device::cpu();
  std::unique_ptr<detail::Collective> collective =
      on_gpu ? detail::make_nccl_collective(world, device, options.collective_timeout_seconds)
             : detail::make_mpi_collective(world);
  MultiWorkerOptions resolved = options;
  if (resolved.bucket_bytes == 0) {
    resolved.bucket_bytes = on_gpu ? std::size_t{25} << 20 : std::size_t{64} << 10;
  }
  std::vector<std::pair<std::string, std::string>> settings{
      {"Tandem version", version()},
      {"replica device type", on_gpu ? "GPU" : "CPU"},
      {"collective", collective->name()}};
  settings.insert(settings.end(), options.run_configuration.begin(),
                  options.run_configuration.end());
  world.agree(settings, options.join_timeout_seconds, "the start-up of the workers");
  auto distribution = std::make_shared<detail::MultiWorkerDistribution>(
      world, device, std::move(collective), resolved);
  leave_on_error.armed = false;  // the distribution leaves when it goes
  worker_ = distribution;
  initialize(std::move(distribution), {device}, world.size(), world.rank());
}

CommunicationStats MultiWorker::communication_stats() const {
  return worker_->stats();
}

std::string MultiWorker::description() const {
  return "MultiWorker(" + std::to_string(num_workers()) + " worker" +
         (num_workers() == 1 ? "" : "s") + ", " + devices().front().str() + " per worker)";
}

}  // namespace tandem::distribute
