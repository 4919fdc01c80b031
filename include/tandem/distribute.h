#pragma once
// Devices and distribution strategies, in the spirit of tf.distribute: what accelerators this
// machine has (discover_devices), and how Model::fit spreads training over them (Strategy).
//
//   auto strategy = distribute::Strategy::auto_select();  // TPU, several GPUs, one GPU, the CPU
//   nn::Model model = [&] {
//     const auto scope = strategy->scope();               // models compiled here use it
//     nn::Model m = nn::zoo::build("cnn", {28, 28, 1}, 10);
//     m.compile({.optimizer = train::Adam(1e-3), .loss = ..., .metrics = {"accuracy"}});
//     return m;
//   }();
//   dataset.batch(strategy->global_batch_size(32));       // 32 examples per replica
//   model.fit(dataset, {.epochs = epochs});               // unchanged
//
// The rules every strategy follows:
// - Batches. The dataset yields global batches: global batch = per-replica batch x
//   num_replicas_in_sync(). Every worker iterates the same global batches (same data, same
//   shuffle seed; checked at start-up) and trains on its contiguous share of each: with R
//   replicas and a batch of B examples, replica r takes B / R examples, the first B % R replicas
//   one more (tf.data's DATA auto-sharding, at batch granularity). A replica left without
//   examples (B < R) contributes nothing to that step.
// - Gradients. Each replica's gradient of its mean loss is weighted by its share of the batch
//   (b_r / B) and the weighted gradients are summed across replicas, so the update uses the mean
//   gradient over the global batch: one step equals a single-device step on the whole global
//   batch, up to float rounding. Every replica applies the same update, so all replicas hold
//   bit-identical weights after every step; training starts from rank 0's weights.
// - Learning rate. The rate applies to the global batch as given; it is not scaled
//   automatically (as in TensorFlow). scaled_learning_rate() applies the linear scaling rule
//   (rate x replicas, Goyal et al. 2017, best with a warm-up) when asked.
// - BatchNormalization. Each replica normalises with its own batch statistics (TensorFlow's
//   default, synchronized=False); after every step the moving mean and variance become the
//   average over replicas weighted like the gradients. The moving average is linear, so this
//   equals TensorFlow's ON_READ/MEAN aggregation of per-replica moving statistics, and keeps
//   every replica identical.
// - Metrics and loss. fit's logs cover the whole global batch: the predictions of all replicas
//   are gathered and the loss and metrics computed on them, so they match a single-device run.
// - Evaluation and prediction run on each worker's first device over the whole data set (the
//   replicas are identical, so every worker gets the same result). train_on_batch and
//   test_on_batch are not distributed: they run the model as it is, on this process alone.
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tandem/device.h"
#include "tandem/error.h"

namespace tandem::train::detail {
class Distribution;
}
namespace tandem::distribute::detail {
class MultiWorkerDistribution;
}

namespace tandem::xla {
class Client;
}

namespace tandem::distribute {

// ---------------------------------------------------------------------------------------------
// Device discovery. Nothing here needs a driver at build or run time: the CUDA runtime and
// driver, NCCL, cuDNN and PJRT plugins are loaded with dlopen when present, and each absent
// piece comes with the reason.
// ---------------------------------------------------------------------------------------------
// The host CPU: cpuid for the instruction sets (and whether the OS saves their registers),
// /proc/cpuinfo for topology, /proc/meminfo for memory.
struct IsaFeature {
  std::string name;  // "AVX-512F"
  bool available;    // the CPU has it and the OS enabled its register state
};

struct CpuInfo {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD"; empty off x86
  std::string model;   // brand string, e.g. "Intel(R) Xeon(R) Platinum 8480+"
  int sockets = 0;
  int cores = 0;              // physical cores across all sockets
  int threads = 0;            // logical processors the OS lists
  int threads_available = 0;  // this process may use: its affinity, capped by a cgroup CPU quota
  std::vector<IsaFeature> features;
  std::int64_t memory_total_bytes = 0;
  std::int64_t memory_available_bytes = 0;
};

CpuInfo probe_cpu();

struct GpuInfo {
  int index = 0;                  // the CUDA ordinal: Device::cuda(index)
  std::string name;               // "NVIDIA H200"
  std::int64_t memory_bytes = 0;  // total device memory
  int compute_capability_major = 0;
  int compute_capability_minor = 0;
  int multiprocessors = 0;
  std::string pci_bus_id;  // "0000:17:00.0"
};

// A shared library found (or not) at run time.
struct LibraryInfo {
  bool loaded = false;
  std::string path;     // the file loaded; empty when none was
  std::string version;  // "2.28.3"; empty when unknown
  std::string reason;   // why it is not loaded; empty when it is
};

struct CudaInfo {
  LibraryInfo runtime;      // libcudart
  LibraryInfo driver;       // libcuda, the NVIDIA driver's user-space library
  int runtime_version = 0;  // 13000 for CUDA 13.0; 0 when the runtime is not loaded
  int driver_version = 0;   // the newest CUDA version the driver supports; 0 without a driver
  std::vector<GpuInfo> gpus;
  int pci_gpus = 0;                // NVIDIA display and 3D controllers on the PCI bus
  std::string reason;              // why no GPU was found; empty when there are some
  bool backend_built = false;      // this build of Tandem has the CUDA backend
  bool backend_available = false;  // and it came up on this machine
  std::string backend_reason;      // why the backend is not available
  // A GPU Tandem can train on: found, and the backend up to run kernels on it.
  bool usable() const { return !gpus.empty() && backend_available; }
};

// A PCI function with Google's vendor id (0x1ae0): a TPU chip on this host.
struct TpuChip {
  std::string pci_address;  // "0000:00:04.0"
  std::string device_id;    // "0x0062"
};

struct TpuInfo {
  LibraryInfo plugin;                 // the PJRT plugin (libtpu.so); version is its PJRT C API
  std::vector<std::string> searched;  // where the plugin was looked for, in order
  std::vector<TpuChip> chips;
  std::string reason;          // why no TPU can be used; empty when one can
  bool backend_built = false;  // this build of Tandem has the XLA backend
  // The process holding libtpu's lock, "PID 1234 (python3 train.py)": a TPU serves one process
  // at a time, and libtpu refuses a second. Empty when none holds it.
  std::string held_by;
  bool usable() const {
    return backend_built && plugin.loaded && !chips.empty() && held_by.empty();
  }
};

struct DeviceInventory {
  CudaInfo cuda;
  LibraryInfo nccl;   // for multi-GPU all-reduce
  LibraryInfo cudnn;  // reported by `tandem doctor`
  TpuInfo tpu;
};

// Where discovery looks. from_environment() gives the defaults: sonames on the loader's search
// path, overridden by TANDEM_CUDA_RUNTIME, TANDEM_CUDA_DRIVER, TANDEM_NCCL_LIBRARY and
// TANDEM_PJRT_PLUGIN (a file), else pjrt_plugin_candidates("tpu"); TANDEM_PCI_DEVICES_DIR
// replaces /sys/bus/pci/devices (a container's view of the host's, or a test's);
// ALLOW_MULTIPLE_LIBTPU_LOAD=1, which makes libtpu skip its lock, makes discovery skip it too.
struct DiscoveryOptions {
  std::vector<std::string> cuda_runtime_libraries;  // tried in order
  std::string cuda_driver_library;
  std::vector<std::string> nccl_libraries;
  std::vector<std::string> cudnn_libraries;
  std::vector<std::string> pjrt_plugins;  // files or sonames, tried in order
  std::string pci_devices_dir = "/sys/bus/pci/devices";
  // The file libtpu locks (fcntl F_SETLK, whole file) while a process has the TPU open; its path
  // is fixed in libtpu. Empty: not checked.
  std::string libtpu_lockfile = "/tmp/libtpu_lockfile";
  static DiscoveryOptions from_environment();
};

DeviceInventory discover_devices(
    const DiscoveryOptions& options = DiscoveryOptions::from_environment());
// The TPU part of discover_devices alone (no CUDA library loaded).
TpuInfo discover_tpu(const DiscoveryOptions& options = DiscoveryOptions::from_environment());

// Where the PJRT plugin of a platform is looked for, in order, as JAX looks:
// PJRT_NAMES_AND_LIBRARY_PATHS ("cuda:/path/plugin.so,tpu:..."), the packages pip installs in the
// site-packages of each python3 on PATH, $VIRTUAL_ENV, ~/.local and the system's
// (jax_plugins/xla_cuda13/xla_cuda_plugin.so of jax-cuda13-pjrt for gpu, libtpu/libtpu.so for
// tpu, after TPU_LIBRARY_PATH and the soname libtpu.so), and for cpu the plugin
// scripts/fetch-pjrt.sh fetched. Only existing files are listed, except the soname. Throws
// InvalidArgument for a platform other than cpu, gpu and tpu.
std::vector<std::string> pjrt_plugin_candidates(const std::string& platform);

// The MPI library Tandem runs on ("Open MPI v4.1.4, ..."), asked without starting MPI.
std::string mpi_library_version();

// Processes started together by mpirun or `tandem launch` (OMPI_COMM_WORLD_SIZE, PMI_SIZE);
// 1 when this process was started alone.
int launched_processes();

// ---------------------------------------------------------------------------------------------
// Strategies.
// ---------------------------------------------------------------------------------------------

// A device or engine that cannot be used here; the message says why and what to do.
class DeviceUnavailable : public Error {
 public:
  using Error::Error;
};

enum class LearningRateScaling { none, linear };

// Keeps a strategy current on this thread: models compiled while it lives train under it.
class StrategyScope {
 public:
  explicit StrategyScope(std::shared_ptr<train::detail::Distribution> distribution);
  ~StrategyScope();
  StrategyScope(StrategyScope&&) noexcept;
  StrategyScope& operator=(StrategyScope&&) = delete;
  StrategyScope(const StrategyScope&) = delete;
  StrategyScope& operator=(const StrategyScope&) = delete;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct MultiWorkerOptions {
  // How long to wait for every worker to start and reach a training run; then every worker
  // stops with an error naming the missing ranks.
  double join_timeout_seconds = 300.0;
  // How long one collective (a gradient bucket, the start-up checks) may take before the workers
  // hold a roll call and stop, naming the ranks that did not answer.
  double collective_timeout_seconds = 300.0;
  // Gradients are all-reduced in buckets of about this size, each started as soon as the backward
  // pass has produced all of its gradients. 0 chooses: 64 KiB where MPI sums CPU tensors (small
  // buckets let the transfers run during the backward pass; bench/RESULTS.md has the figures),
  // 25 MiB where NCCL sums GPU tensors (PyTorch DDP's size: fewer, larger launches).
  std::size_t bucket_bytes = 0;
  // The CPU even where GPUs are present (one CPU replica per process).
  bool cpu_only = false;
  // What decides the training, setting by setting ("--lr-schedule" = "cosine", ...): compared
  // across the workers when they start, before any data is read, so that workers started with
  // different settings stop with an error naming each setting that differs and the ranks,
  // instead of training together into weights that match neither run.
  std::vector<std::pair<std::string, std::string>> run_configuration;
};

// What combining gradients cost a worker over the steps trained so far.
struct CommunicationStats {
  std::int64_t steps = 0;
  std::int64_t collectives = 0;       // all-reduces and gathers started
  std::int64_t bytes = 0;             // all-reduced or gathered by this worker
  std::int64_t gradient_buckets = 0;  // gradient all-reduces started (counted in collectives too)
  // Gradient buckets whose all-reduce started while the backward pass was still computing other
  // gradients: the communication that overlaps the backward pass.
  std::int64_t overlapped_buckets = 0;
  // Blocked waiting for collectives to finish: the communication the backward pass did not hide.
  double wait_seconds = 0;
  // Packing gradients into buckets, unpacking the sums, averaging the moving statistics.
  double pack_seconds = 0;
};

class Strategy {
 public:
  virtual ~Strategy();
  Strategy(const Strategy&) = delete;
  Strategy& operator=(const Strategy&) = delete;

  // "OneDevice(cpu)", "Mirrored(cuda:0, cuda:1)", "MultiWorker(2 workers, cpu, MPI)".
  virtual std::string description() const = 0;
  // The replicas on this process's devices.
  const std::vector<Device>& devices() const { return devices_; }
  // Replicas training together, over every worker.
  int num_replicas_in_sync() const { return static_cast<int>(devices_.size()) * num_workers_; }
  int num_workers() const { return num_workers_; }
  int worker_index() const { return worker_index_; }
  // Worker 0 reports (progress bar, results, files).
  bool is_chief() const { return worker_index_ == 0; }

  std::int64_t global_batch_size(std::int64_t per_replica_batch_size) const;
  double scaled_learning_rate(double learning_rate, LearningRateScaling rule) const;

  // Models compiled while the returned scope lives train under this strategy.
  [[nodiscard]] StrategyScope scope() const;

  // How auto_select got here: one line per fallback, then the choice (empty when the strategy
  // was made directly).
  const std::vector<std::string>& selection_log() const { return selection_log_; }

  // The cost of combining gradients so far (all zero for strategies that do not measure it:
  // OneDevice combines nothing; MultiWorker measures).
  virtual CommunicationStats communication_stats() const { return {}; }

  // The fastest strategy for this machine, in the order TPU, several GPUs (Mirrored), one GPU,
  // the CPU; under mpirun or `tandem launch` with several processes, MultiWorker on the best
  // single device per process. Every fallback is written to `log` (nullptr: nowhere) with its
  // reason, and kept in selection_log().
  static std::shared_ptr<Strategy> auto_select(std::ostream* log = nullptr,
                                               const MultiWorkerOptions& multi_worker = {});
  static std::shared_ptr<Strategy> auto_select(const DeviceInventory& inventory, std::ostream* log,
                                               const MultiWorkerOptions& multi_worker = {});

 protected:
  Strategy() = default;
  // Each strategy's constructor sets itself up through this once it has its distribution.
  void initialize(std::shared_ptr<train::detail::Distribution> distribution,
                  std::vector<Device> devices, int num_workers, int worker_index);

 private:
  std::shared_ptr<train::detail::Distribution> distribution_;
  std::vector<Device> devices_;
  int num_workers_ = 1;
  int worker_index_ = 0;
  std::vector<std::string> selection_log_;
};

// What auto_select would choose for an inventory and a number of launched processes, and why;
// for `tandem devices`, `tandem doctor` and tests. kind is "tpu", "mirrored", "one_device" or
// "multi_worker".
struct StrategyChoice {
  std::string kind;
  std::vector<Device> devices;  // per process
  std::vector<std::string> log;
};
StrategyChoice choose_strategy(const DeviceInventory& inventory, int processes);

// Training on one device: the CPU or one GPU. Throws DeviceUnavailable when the device does not
// exist or cannot run Tandem's kernels, saying which devices there are.
class OneDevice final : public Strategy {
 public:
  explicit OneDevice(Device device);
  OneDevice(Device device, const DeviceInventory& inventory);
  std::string description() const override;
};

// Several replicas in one process, gradients combined each step: every local GPU, all-reduced
// with NCCL. On a machine without usable GPUs it degenerates to one replica on the CPU. Given
// devices may also repeat the CPU ({cpu, cpu}: logical CPU replicas, combined in host memory),
// which runs the same replication logic without a GPU.
class Mirrored final : public Strategy {
 public:
  Mirrored();
  explicit Mirrored(std::vector<Device> devices);
  Mirrored(std::vector<Device> devices, const DeviceInventory& inventory);
  std::string description() const override;
};

// One process per device (or machine), started by mpirun or `tandem launch -n N`. MPI starts the
// workers, checks their configurations agree, broadcasts rank 0's weights and all-reduces CPU
// gradients; NCCL all-reduces GPU gradients (its unique id travels over MPI). Each process
// trains on its local GPU (by its rank on the node) or on the CPU. A worker that never joins or
// stops answering makes every other worker stop after the timeouts with an error naming it; the
// launcher stops the rest when one dies.
class MultiWorker final : public Strategy {
 public:
  explicit MultiWorker(const MultiWorkerOptions& options = {});
  MultiWorker(const MultiWorkerOptions& options, const DeviceInventory& inventory);
  std::string description() const override;
  CommunicationStats communication_stats() const override;

 private:
  std::shared_ptr<const detail::MultiWorkerDistribution> worker_;
};

// What the Xla strategy trains on.
struct XlaOptions {
  std::string platform = "cpu";  // cpu (XLA:CPU), gpu (XLA:GPU), tpu
  int replicas = 1;              // 0: every device the plugin reports
  // A PJRT plugin file; empty: the first of pjrt_plugin_candidates(platform).
  std::string plugin;
};

// Training through XLA (PJRT): fit's whole training step traced once per batch shape, lowered
// to one StableHLO module and compiled by the plugin; weights and optimizer slots stay on the
// XLA device between steps, updated in place, and are copied back into the model after each
// step. Throws DeviceUnavailable when the build has no XLA backend or the plugin cannot be
// loaded, saying why. A TPU is only initialised where one is on the PCI bus (libtpu otherwise
// keeps asking the cloud metadata server).
class Xla : public Strategy {
 public:
  explicit Xla(const XlaOptions& options = {});
  std::string description() const override;
  // "XLA:cpu cpu:0 (PJRT C API 0.115, xla_version 2.0.0)": the device and its plugin.
  std::string device_description() const;

  // What compiling cost so far: programs (one per batch shape), the seconds spent tracing,
  // lowering and compiling them, and the wall time of the first step (those plus its run).
  struct CompileStats {
    int programs = 0;
    double seconds = 0.0;
    double first_step_seconds = 0.0;
  };
  CompileStats compile_stats() const { return *compile_stats_; }

 private:
  std::shared_ptr<const xla::Client> client_;
  std::shared_ptr<CompileStats> compile_stats_ = std::make_shared<CompileStats>();
};

// OneDevice on device 0 of the platform's plugin, run eagerly op by op (Device::xla(0), the xla
// devices of tandem/xla.h: each op compiled alone, once, and cached): for debugging what a
// compiled step does, and for custom loops. The plugin is found as Xla finds it. Throws
// DeviceUnavailable saying why where it cannot start, InvalidArgument for more than one replica.
std::shared_ptr<Strategy> xla_op_by_op(const XlaOptions& options);

// TPUStrategy: the Xla strategy on the TPU chips (cores) libtpu reports, every one of them
// unless `replicas` says how many. Throws DeviceUnavailable, with what was found and what to
// do, when the inventory has no usable TPU (no chip on the PCI bus, no plugin, no XLA backend)
// or libtpu cannot start.
class TPU final : public Xla {
 public:
  explicit TPU(int replicas = 0);
  TPU(const DeviceInventory& inventory, int replicas = 0);
  std::string description() const override;
  // Why the TPU strategy cannot be used with this inventory ("" when it can be tried).
  static std::string unavailable_reason(const DeviceInventory& inventory);
};

// ---- Strategies by name, as a run names them ----

struct StrategyOptions {
  // auto (the best of TPU, several GPUs, one GPU, the CPU, with the reason for each fallback),
  // cpu, gpu or gpu:N (one GPU), mirrored (every local GPU), multi-worker (one process per
  // device), xla-cpu, xla-gpu (the whole step compiled by XLA through a PJRT plugin), tpu.
  std::string name = "auto";
  // XLA: devices trained on together, one replica each; 0: one (xla-cpu, xla-gpu), every TPU core.
  int replicas = 0;
  std::string pjrt_plugin;  // XLA: the plugin file; empty: the one found for the platform
  // XLA: run eagerly on the platform's device, each op compiled alone, instead of the whole step.
  bool op_by_op = false;
  MultiWorkerOptions multi_worker;
};

// Throws ConfigError ("unknown strategy 'x' for <name>; choose ...") unless `text` names one.
void check_strategy_name(const std::string& name, const std::string& text);

// The strategy the options ask for. One that cannot run here throws DeviceUnavailable naming the
// setting and why (auto falls back instead, down to the CPU); settings that do not go together
// are ConfigError. Settings are named by key (strategy, replicas, pjrt-plugin, jit).
std::shared_ptr<Strategy> make_strategy(const StrategyOptions& options,
                                        const SettingName& name = setting_identifier);

// "device: cpu (AMD EPYC 7B13, 2 threads, oneDNN ...)\nstrategy: ...", with the global batch and
// one line per fallback auto-selection took.
std::string strategy_summary(const Strategy& strategy, const StrategyOptions& options,
                             std::int64_t per_replica_batch_size,
                             const SettingName& name = setting_identifier);

// Why `threads` CPU threads (0: automatic, never warned about) will be slow, when they are more
// than the cores this process may use (usable_cpu_cores): the extra ones wait on each other at
// every kernel.
std::optional<std::string> thread_count_warning(int threads,
                                                const SettingName& name = setting_identifier);

}  // namespace tandem::distribute
