// Xla: training through a PJRT plugin (XLA:CPU, XLA:GPU, a TPU). fit's own training step (the
// forward pass, the tape's backward pass, the optimizer update) is traced once per batch shape
// on symbolic tensors, lowered whole to one StableHLO module and compiled by the plugin. Each
// step then moves the batch and the host operands (learning rate and step, dropout's seed and
// offset) to the device and runs that one executable; the weights, optimizer slots and moving
// statistics stay on the device between steps, donated to the executable and updated in place
// (tf.aliasing_output), and their new values are copied into the model's host tensors, so that
// evaluation, callbacks and checkpoints see the weights of the last step.
#include <chrono>
#include <map>

#include "core/tensor_copy.h"
#include "distribute/replication.h"
#include "tandem/autodiff.h"
#include "tandem/compile.h"
#include "tandem/distribute.h"
#include "tandem/ops.h"
#include "tandem/runtime.h"
#include "tandem/xla.h"
#include "train/distribution.h"

namespace tandem::distribute {
namespace detail {
namespace {

// One compiled training step: the traced graph, its module's arguments, the executable.
struct XlaProgram {
  CompiledStep step;
  CompiledStep::Stablehlo lowered;
  xla::Executable executable;
};

// One replica's step, as TPUStrategy runs it: the gradients and the moving statistics become
// their mean over the replicas (stablehlo.all_reduce, then / N), so every replica applies the
// same update and keeps the same statistics. One replica combines nothing.
class XlaReplicaStep final : public train::detail::ReplicaStep {
 public:
  XlaReplicaStep(int replicas, std::vector<Tensor> statistics)
      : replicas_(replicas), statistics_(std::move(statistics)) {}
  GradientTape::GradientReady gradient_ready() override { return {}; }
  bool reduce(std::vector<Tensor>& gradients, const std::vector<Tensor>&) override {
    if (replicas_ == 1) return true;
    for (Tensor& gradient : gradients) {
      if (gradient.defined()) gradient = mean_over_replicas(gradient);
    }
    // The forward pass has updated each replica's statistics with its own batch's: their mean
    // is written back in place (statistic - 1 * (statistic - mean)), as the update ops write.
    NoGradGuard no_grad;
    Tensor no_velocity;
    for (Tensor& statistic : statistics_) {
      sgd_update(statistic, sub(statistic, mean_over_replicas(statistic)), no_velocity,
                 update_schedule(1.0, 1, statistic.device()));
    }
    return true;
  }

 private:
  Tensor mean_over_replicas(const Tensor& x) const {
    return all_reduce(x, replicas_) * (1.0 / replicas_);
  }
  int replicas_;
  std::vector<Tensor> statistics_;
};

class XlaDistribution final : public train::detail::Distribution {
 public:
  XlaDistribution(std::shared_ptr<const xla::Client> client, int replicas,
                  std::shared_ptr<Xla::CompileStats> compile_stats)
      : client_(std::move(client)),
        replicas_(replicas),
        compile_stats_(std::move(compile_stats)),
        steps_("xla_train_step") {}

  bool is_chief() const override { return true; }

  // Weights may have been set since an earlier fit: the device copies are made again.
  void prepare(nn::Model& model, const data::Dataset&, int) override {
    model_ = &model;
    weights_from_host();
  }

  // The tensors the steps updated since the last call get replica 0's values (every replica
  // holds the same).
  void weights_to_host() override {
    for (const auto& [id, host] : stale_on_host_)
      resident_.at(id).front().copy_to_host(host);
    stale_on_host_.clear();
  }

  void weights_from_host() override {
    weights_to_host();
    resident_.clear();
  }

  // The first step (tracing, lowering and compiling its program, then running it) is timed.
  std::pair<Tensor, Tensor> step(const Tensor& x, const Tensor& y, const train::Loss&,
                                 const train::detail::ReplicaStepFn& run_replica) override {
    if (compile_stats_->programs > 0) return run_step(x, y, run_replica);
    const auto start = std::chrono::steady_clock::now();
    std::pair<Tensor, Tensor> results = run_step(x, y, run_replica);
    compile_stats_->first_step_seconds = seconds_since(start);
    return results;
  }

  Device input_device() const override { return Device::cpu(); }
  bool compiles_steps() const override { return true; }

 private:
  static double seconds_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  std::pair<Tensor, Tensor> run_step(const Tensor& x, const Tensor& y,
                                     const train::detail::ReplicaStepFn& run_replica) {
    if (model_ != nullptr) {
      ensure_built(*model_, x);
      place_weights(*model_, Device::cpu());
      statistics_ = moving_statistics(*model_);
      model_ = nullptr;
    }
    const std::int64_t batch = x.dim(0);
    if (batch % replicas_ != 0) {
      throw InvalidArgument("a global batch of " + std::to_string(batch) +
                            " examples does not split over " + std::to_string(replicas_) +
                            " XLA replicas: each replica runs one program of one static shape; "
                            "make the dataset's size and the batch multiples of the replicas "
                            "(drop the last partial batch)");
    }
    const std::int64_t share = batch / replicas_;
    const Tensor x_host = x.to(Device::cpu());  // (B, ...)
    const Tensor y_host = y.to(Device::cpu());  // (B, ...)
    std::vector<Tensor> x_shares, y_shares;
    for (int r = 0; r < replicas_; ++r) {
      x_shares.push_back(tandem::detail::rows(x_host, r * share, share));
      y_shares.push_back(tandem::detail::rows(y_host, r * share, share));
    }
    XlaProgram& program = program_for(x_shares[0], y_shares[0], run_replica);
    const CompiledStep::Stablehlo& lowered = program.lowered;
    const std::vector<Tensor>& host_operands = program.step.fill_host_operands();
    // Per replica, @main's arguments: its share of the batch, the captured tensors (on its
    // device already), the host operands.
    std::vector<std::vector<xla::Buffer>> transient(static_cast<std::size_t>(replicas_));
    std::vector<std::vector<const xla::Buffer*>> arguments(static_cast<std::size_t>(replicas_));
    for (int r = 0; r < replicas_; ++r) {
      auto& moved = transient[static_cast<std::size_t>(r)];
      moved.push_back(client_->to_device(x_shares[static_cast<std::size_t>(r)], r));
      moved.push_back(client_->to_device(y_shares[static_cast<std::size_t>(r)], r));
      for (const Tensor& operand : host_operands)
        moved.push_back(client_->to_device(operand, r));
      auto& list = arguments[static_cast<std::size_t>(r)];
      list = {&moved[0], &moved[1]};
      for (const Tensor& captured : lowered.captured)
        list.push_back(&resident(captured)[static_cast<std::size_t>(r)]);
      for (std::size_t k = 2; k < moved.size(); ++k)
        list.push_back(&moved[k]);
    }
    std::vector<std::vector<xla::Buffer>> results = execute(program, arguments);
    // The results after the step's two are the new versions of the donated arguments: they
    // replace the device copies; the model's host tensors get them when fit asks
    // (weights_to_host).
    const std::size_t outputs = results.front().size() - lowered.updated.size();
    for (std::size_t k = 0; k < lowered.updated.size(); ++k) {
      const Tensor& captured = lowered.captured[lowered.updated[k] - 2];
      std::vector<xla::Buffer> updated;
      for (auto& replica_results : results)
        updated.push_back(replica_results[outputs + k]);
      resident_.insert_or_assign(captured.id(), std::move(updated));
      stale_on_host_.insert_or_assign(captured.id(), captured);
    }
    std::vector<Tensor> predictions;
    double loss = 0;
    for (auto& replica_results : results) {
      predictions.push_back(replica_results[0].to_host());
      loss += replica_results[1].to_host().item();
    }
    NoGradGuard no_grad;
    const Tensor all_predictions =
        predictions.size() == 1 ? predictions.front() : concat(predictions, 0);  // (B, ...)
    // Equal shares: the mean of the replicas' mean losses is the global batch's.
    return {all_predictions, Tensor::scalar(loss / replicas_, results[0][1].dtype())};
  }

  // Runs the step's program; a device that runs out of memory is OutOfMemory (fit adds the
  // batch size and the fixes), naming the platform and what XLA asked for.
  std::vector<std::vector<xla::Buffer>> execute(
      const XlaProgram& program, const std::vector<std::vector<const xla::Buffer*>>& arguments) {
    try {
      return program.executable.execute_replicas(arguments);
    } catch (const xla::PjrtOutOfMemory& error) {
      const std::string message = error.what();
      // XLA:CPU and XLA:GPU say "Out of memory allocating N bytes" (or "... while trying to
      // allocate N bytes").
      std::size_t requested = 0;
      const std::size_t at = message.find("allocat");
      if (at != std::string::npos) {
        const std::size_t digits = message.find_first_of("0123456789", at);
        if (digits != std::string::npos) requested = std::stoull(message.substr(digits, 19));
      }
      const std::string device = "XLA:" + client_->platform();
      throw OutOfMemory(
          "out of memory on " + device + ": the training step's program asked for " +
              (requested > 0 ? format_memory_size(requested) : std::string("more memory")) +
              " and the device had no room (" + message + ")",
          device, requested, 0, 0);
    }
  }

  // The device copies (one per replica) of a tensor the step reads, made at its first use.
  const std::vector<xla::Buffer>& resident(const Tensor& tensor) {
    auto found = resident_.find(tensor.id());
    if (found == resident_.end()) {
      const Tensor host = tensor.to(Device::cpu());
      std::vector<xla::Buffer> copies;
      for (int r = 0; r < replicas_; ++r)
        copies.push_back(client_->to_device(host, r));
      found = resident_.emplace(tensor.id(), std::move(copies)).first;
    }
    return found->second;
  }

  XlaProgram& program_for(const Tensor& x, const Tensor& y,
                          const train::detail::ReplicaStepFn& run_replica) {
    const auto start = std::chrono::steady_clock::now();
    const CompiledStep step = steps_.get(input_signature({x, y}), [&] {
      return trace_step(
          "xla_train_step",
          [&](const std::vector<Tensor>& inputs) {
            XlaReplicaStep replica(replicas_, statistics_);
            auto [y_pred, loss] = run_replica(inputs[0], inputs[1], replica);
            return std::vector<Tensor>{y_pred, loss};
          },
          {x, y}, replicas_);
    });
    // A step's statistics live in its shared state: their address names the compiled step.
    const CompiledStepStats* key = &step.stats();
    if (auto found = programs_.find(key); found != programs_.end()) return found->second;
    CompiledStep::Stablehlo lowered = step.lower_to_stablehlo();
    // Only captured tensors (weights, slots, statistics) may be written: the batch is not kept.
    for (const std::size_t argument : lowered.updated) {
      if (argument < 2 || argument >= 2 + lowered.captured.size()) {
        throw InvalidArgument("the XLA training step writes its argument " +
                              std::to_string(argument) +
                              ", which is not a captured tensor; train this model with "
                              "--strategy cpu");
      }
    }
    xla::CompileOptions options;
    options.num_replicas = replicas_;
    for (int r = 0; r < replicas_; ++r)
      options.replica_device_ids.push_back(client_->devices()[static_cast<std::size_t>(r)].id);
    xla::Executable executable = client_->compile(lowered.module, options);
    const double seconds = seconds_since(start);
    ++compile_stats_->programs;
    compile_stats_->seconds += seconds;
    return programs_.emplace(key, XlaProgram{step, std::move(lowered), std::move(executable)})
        .first->second;
  }

  std::shared_ptr<const xla::Client> client_;
  int replicas_;
  std::shared_ptr<Xla::CompileStats> compile_stats_;
  StepCache steps_;
  std::map<const CompiledStepStats*, XlaProgram> programs_;
  std::map<std::uint64_t, std::vector<xla::Buffer>> resident_;  // by tensor id, per replica
  // The host tensors whose device copies a step has updated since weights_to_host, by id.
  std::map<std::uint64_t, Tensor> stale_on_host_;
  std::vector<Tensor> statistics_;  // the model's moving statistics
  nn::Model* model_ = nullptr;      // to set up on the next step; null once done
};

// What to install for a platform's plugin.
std::string plugin_fix(const std::string& platform) {
  if (platform == "cpu")
    return "run scripts/fetch-pjrt.sh (make deps runs it; it needs the package index)";
  if (platform == "gpu")
    return "pip install jax-cuda13-pjrt, or give the plugin with --pjrt-plugin PATH";
  return "pip install libtpu, or give the plugin with --pjrt-plugin PATH";
}

// The plugin for a platform: the one given, else the first found where JAX looks. A TPU's is
// loaded only where a TPU chip is on the PCI bus.
std::string plugin_for(const XlaOptions& options) {
  if (options.platform == "tpu") {
    const TpuInfo tpu = discover_tpu();
    if (tpu.chips.empty()) {
      throw DeviceUnavailable("no TPU: " + tpu.reason +
                              "; libtpu is not initialised without one (it would keep asking "
                              "the cloud metadata server)");
    }
    if (!tpu.held_by.empty()) throw DeviceUnavailable(tpu.reason);
    if (!options.plugin.empty()) return options.plugin;
    if (!tpu.plugin.loaded) throw DeviceUnavailable("no TPU plugin: " + tpu.reason);
    return tpu.plugin.path;
  }
  if (!options.plugin.empty()) return options.plugin;
  const std::vector<std::string> candidates = pjrt_plugin_candidates(options.platform);
  if (candidates.empty()) {
    throw DeviceUnavailable("no PJRT plugin for XLA:" + options.platform +
                            " was found where JAX looks (PJRT_NAMES_AND_LIBRARY_PATHS, the "
                            "site-packages of the python3 on PATH, ~/.local, /usr/lib); " +
                            plugin_fix(options.platform));
  }
  return candidates.front();
}

}  // namespace
}  // namespace detail

Xla::Xla(const XlaOptions& options) {
  if (!xla::build_info().built) {
    throw DeviceUnavailable("this build of Tandem has no XLA backend: " + xla::build_info().reason);
  }
  if (options.replicas < 0) {
    throw InvalidArgument("Xla: replicas must be at least 1 (or 0: every device), got " +
                          std::to_string(options.replicas));
  }
  const std::string plugin = detail::plugin_for(options);
  try {
    client_ = std::make_shared<const xla::Client>(plugin);
    // XLA:CPU makes 4 devices unless asked for more (the option is logged by the plugin, so it
    // is given only when needed); other platforms have the devices they have.
    if (options.platform == "cpu" &&
        client_->devices().size() < static_cast<std::size_t>(options.replicas)) {
      client_.reset();
      client_ = std::make_shared<const xla::Client>(
          plugin,
          std::vector<xla::Client::Option>{{"cpu_device_count", std::int64_t{options.replicas}}});
    }
  } catch (const xla::PjrtError& error) {
    throw DeviceUnavailable(error.what());
  }
  const std::size_t devices = client_->devices().size();
  const int replicas = options.replicas == 0 ? static_cast<int>(devices) : options.replicas;
  if (devices < static_cast<std::size_t>(replicas)) {
    throw DeviceUnavailable("XLA:" + client_->platform() + " has " + std::to_string(devices) +
                            " device" + (devices == 1 ? "" : "s") + ", fewer than the " +
                            std::to_string(options.replicas) +
                            " replicas asked for; ask for at most " + std::to_string(devices));
  }
  initialize(std::make_shared<detail::XlaDistribution>(client_, replicas, compile_stats_),
             std::vector<Device>(static_cast<std::size_t>(replicas), Device::cpu()), 1, 0);
}

std::shared_ptr<Strategy> xla_op_by_op(const XlaOptions& options) {
  if (options.replicas != 1) {
    throw InvalidArgument("XLA op by op runs on one device, not " +
                          std::to_string(options.replicas) +
                          " replicas; compile the whole step (tandem train --jit on, the XLA "
                          "strategies' default) to train on several");
  }
  if (!xla::build_info().built) {
    throw DeviceUnavailable("this build of Tandem has no XLA backend: " + xla::build_info().reason);
  }
  xla::set_device_plugin(detail::plugin_for(options));
  return std::make_shared<OneDevice>(Device::xla(0));
}

std::string Xla::device_description() const {
  const xla::PluginInfo& plugin = client_->plugin();
  std::string text = "XLA:" + client_->platform() + " " + client_->devices().front().description +
                     " (PJRT C API " + std::to_string(plugin.api_major) + "." +
                     std::to_string(plugin.api_minor);
  for (const auto& [name, value] : plugin.attributes) {
    if (name == "xla_version") text += ", xla_version " + value;
  }
  return text + ")";
}

std::string Xla::description() const {
  const int replicas = num_replicas_in_sync();
  return "Xla(" + client_->platform() + ", " +
         (replicas == 1 ? client_->devices().front().description
                        : std::to_string(replicas) + " replicas") +
         ", plugin " + client_->plugin().path + ")";
}

}  // namespace tandem::distribute
