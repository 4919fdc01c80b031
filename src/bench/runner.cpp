// Running a benchmark matrix: every model x device x precision x batch size present on this
// machine, each trained with Model::fit on synthetic data (or a data set) after a warm-up, with
// the resource monitor sampling and the profiler counting one step's work; then roofline
// estimates for absent hardware and the peers' runs.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "core/text.h"
#include "tandem/bench.h"
#include "tandem/cuda.h"
#include "tandem/data.h"
#include "tandem/distribute.h"
#include "tandem/error.h"
#include "tandem/mixed_precision.h"
#include "tandem/observe.h"
#include "tandem/random.h"
#include "tandem/runtime.h"
#include "tandem/train.h"
#include "tandem/xla.h"

namespace tandem::bench {
namespace {

// Synthetic examples per epoch in epoch mode when BenchOptions::dataset_size is 0: the smoke
// test's 1,000.
constexpr std::int64_t kDefaultDatasetSize = 1000;

// One batch handed out `steps` times per epoch: the model's step time without the cost of
// assembling batches, as accelerator benchmarks measure it (the batch still goes through fit's
// input path and, on a GPU, its host-to-device copy).
class RepeatedBatchDataset final : public data::Dataset {
 public:
  RepeatedBatchDataset(data::Batch batch, std::int64_t steps)
      : batch_(std::move(batch)), steps_(steps) {}

  std::unique_ptr<data::BatchIterator> iterate(std::int64_t) const override {
    return std::make_unique<Iterator>(batch_, steps_);
  }
  std::int64_t num_examples() const override { return steps_ * batch_size(); }
  std::int64_t num_batches() const override { return steps_; }
  std::int64_t batch_size() const override { return batch_.features.shape().front(); }

 private:
  class Iterator final : public data::BatchIterator {
   public:
    Iterator(const data::Batch& batch, std::int64_t steps) : batch_(batch), left_(steps) {}
    std::optional<data::Batch> next() override {
      if (left_ == 0) return std::nullopt;
      --left_;
      return batch_;
    }

   private:
    const data::Batch& batch_;
    std::int64_t left_;
  };

  data::Batch batch_;
  std::int64_t steps_;
};

// Sets the global mixed-precision policy for the models built while it lives.
class PolicyGuard {
 public:
  explicit PolicyGuard(Precision precision) {
    mixed_precision::set_global_policy(precision == Precision::bf16 ? "mixed_bfloat16" : "float32");
  }
  ~PolicyGuard() { mixed_precision::clear_global_policy(); }
  PolicyGuard(const PolicyGuard&) = delete;
  PolicyGuard& operator=(const PolicyGuard&) = delete;
};

std::string describe(const std::string& model, Precision precision, std::int64_t batch,
                     const std::string& device) {
  return model + " " + precision_name(precision) + " batch " + std::to_string(batch) + " on " +
         device;
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm parts{};
  gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "unknown";
  return name;
}

struct Measured {
  train::History history;
  std::vector<OpWork> ops;  // per step
  observe::ResourceSummary resources;
  std::size_t peak_memory = 0;
};

// The profiled step's ops, per step.
std::vector<OpWork> profiled_ops(const observe::Profiler& profiler) {
  const observe::ProfileReport report = profiler.report();
  const double steps = std::max<double>(1.0, static_cast<double>(report.steps));
  std::vector<OpWork> ops;
  for (const observe::OpProfile& op : report.ops) {
    ops.push_back({op.op, op.phase, static_cast<std::int64_t>(std::llround(op.calls / steps)),
                   op.flops / steps, op.bytes / steps, op.seconds / steps});
  }
  return ops;
}

// Fits `model` for `epochs` passes over `timed`, monitored, after `warmup` (a dataset of
// `warmup_steps` steps fitted first) or, without one, with the first `warmup_steps` of `timed`
// left out of the History's throughput. Either way the last warm-up step is profiled.
Measured fit_measured(nn::Model& model, Device device, const data::Dataset* warmup,
                      const data::Dataset& timed, int epochs, int warmup_steps) {
  Measured measured;
  auto profiler = std::make_shared<observe::Profiler>();
  const std::int64_t profiled_step = std::max(warmup_steps, 1) - 1;
  auto profile =
      std::make_shared<observe::ProfilerCallback>(profiler, profiled_step, profiled_step);
  train::FitOptions options;
  options.verbose = 0;
  if (warmup != nullptr) {
    train::FitOptions warmup_options = options;
    warmup_options.callbacks.push_back(profile);
    model.fit(*warmup, warmup_options);
    options.warmup_steps = 0;
  } else {
    options.callbacks.push_back(profile);
    options.warmup_steps = warmup_steps;
  }
  observe::ResourceMonitorOptions monitor_options;
  monitor_options.interval_seconds = 0.25;
  observe::ResourceMonitor monitor(monitor_options);
  reset_peak_memory(device);
  monitor.start();
  options.epochs = epochs;
  measured.history = model.fit(timed, options);
  monitor.stop();
  measured.peak_memory = memory_info(device).peak;
  measured.resources = monitor.summary();
  measured.ops = profiled_ops(*profiler);
  return measured;
}

double total(const std::vector<OpWork>& ops, double OpWork::*field) {
  double sum = 0.0;
  for (const OpWork& op : ops)
    sum += op.*field;
  return sum;
}

// Step statistics, window throughputs and epoch times from the History.
void fill_timings(Row& row, const train::History& history, bool epochs_are_data_passes) {
  const std::int64_t warmup = history.warmup_steps();
  std::int64_t step_index = 0;
  const auto& seconds = history.step_seconds();
  const auto& examples = history.step_examples();
  for (std::size_t epoch = 0; epoch < seconds.size(); ++epoch) {
    double window_seconds = 0.0;
    std::int64_t window_examples = 0;
    for (std::size_t step = 0; step < seconds[epoch].size(); ++step, ++step_index) {
      if (step_index < warmup) continue;
      row.step_seconds.push_back(seconds[epoch][step]);
      window_seconds += seconds[epoch][step];
      window_examples += examples[epoch][step];
    }
    if (window_seconds > 0) {
      row.window_samples_per_second.push_back(static_cast<double>(window_examples) /
                                              window_seconds);
    }
  }
  if (row.step_seconds.empty()) {
    throw InvalidArgument("no timed step: the run has " + std::to_string(step_index) +
                          " steps and --warmup-steps leaves out " + std::to_string(warmup) +
                          "; train longer or warm up less");
  }
  row.step = summarize(row.step_seconds);
  // From the median step, as run_peer.py reports its peers: robust to the stalls a shared
  // machine adds to some steps (the windows' own rates, stalls included, are kept beside it).
  row.samples_per_second = static_cast<double>(row.batch_size) / row.step.median;
  if (epochs_are_data_passes) row.epoch_seconds = history.epoch_seconds();
  row.input_wait_share = history.input_wait_share();
}

data::ImageClassificationData checked_data_set(const BenchOptions& options,
                                               const Workload& workload) {
  if (workload.model != "mlp" && workload.model != "cnn") {
    throw InvalidArgument("--data holds Fashion-MNIST/MNIST images, which fit mlp and cnn; " +
                          workload.model + " takes " + shape_str(workload.example_shape) +
                          " inputs (leave out --data to use synthetic ones)");
  }
  return data::load_fashion_mnist(options.data_dir);
}

Row measure(const BenchOptions& options, const Workload& workload, const DeviceChoice& choice,
            Precision precision, std::int64_t batch) {
  const Device device = *choice.device;
  const PolicyGuard policy(precision);
  // XLA platforms train through their strategy: the whole step compiled by the plugin.
  std::unique_ptr<distribute::Strategy> strategy;
  if (choice.xla_platform.empty()) {
    strategy = std::make_unique<distribute::OneDevice>(device);
  } else if (choice.xla_platform == "tpu") {
    strategy = std::make_unique<distribute::TPU>(1);
  } else {
    strategy =
        std::make_unique<distribute::Xla>(distribute::XlaOptions{.platform = choice.xla_platform});
  }
  const distribute::StrategyScope scope = strategy->scope();
  manual_seed(1);
  nn::Model model = build_model(workload);
  model.compile({.optimizer = train::Adam(options.learning_rate),
                 .loss = train::SparseCategoricalCrossentropy(/*from_logits=*/true),
                 .metrics = {},
                 .jit_compile = options.jit_compile});

  Row row;
  row.kind = "measured";
  row.framework = "tandem";
  row.framework_version = version();
  row.model = workload.model;
  row.device = choice.xla_platform.empty() ? device.str() : choice.spec;
  row.device_name = choice.name;
  row.precision = precision_name(precision);
  row.batch_size = batch;
  row.threads = num_threads();
  row.epoch_examples =
      options.epoch_examples > 0 ? options.epoch_examples : workload.epoch_examples;

  Measured measured;
  if (options.epochs > 0) {
    std::shared_ptr<data::TensorDataset> dataset;
    if (!options.data_dir.empty()) {
      const data::ImageClassificationData loaded = checked_data_set(options, workload);
      dataset = std::make_shared<data::TensorDataset>(loaded.train_images, loaded.train_labels);
    } else {
      const std::int64_t examples =
          options.dataset_size > 0 ? options.dataset_size : kDefaultDatasetSize;
      auto [features, labels] = synthetic_batch(workload, examples, 7);
      dataset = std::make_shared<data::TensorDataset>(features, labels);
    }
    dataset->shuffle(1).batch(batch);
    if (options.epoch_examples == 0) row.epoch_examples = dataset->num_examples();
    measured = fit_measured(model, device, nullptr, *dataset, options.epochs, options.warmup_steps);
  } else {
    auto [features, labels] = synthetic_batch(workload, batch, 7);
    // On a device the batch stays there, as the peers keep theirs: the step is measured, not a
    // host-to-device copy of the same batch each step (a data set's batches do travel).
    const Device home = choice.xla_platform.empty() ? device : Device::cpu();
    const data::Batch held{features.to(home), labels.to(home)};
    const RepeatedBatchDataset warmup(held, std::max(options.warmup_steps, 1));
    const RepeatedBatchDataset timed(held, options.steps);
    measured = fit_measured(model, device, &warmup, timed, options.windows, options.warmup_steps);
  }
  fill_timings(row, measured.history, options.epochs > 0);
  row.training_step = !choice.xla_platform.empty() ? "xla"
                      : model.jit_compiled()       ? "compiled"
                                                   : "eager";
  if (const auto* xla_strategy = dynamic_cast<const distribute::Xla*>(strategy.get())) {
    const distribute::Xla::CompileStats compiled = xla_strategy->compile_stats();
    row.compile_seconds = compiled.seconds;
    row.first_step_seconds = compiled.first_step_seconds;
  }
  row.ops = std::move(measured.ops);
  row.flops_per_step = total(row.ops, &OpWork::flops);
  row.bytes_per_step = total(row.ops, &OpWork::bytes);
  row.peak_memory_bytes = static_cast<std::int64_t>(measured.peak_memory);
  const auto epoch_steps = (row.epoch_examples + batch - 1) / batch;
  row.epoch_seconds_projected = static_cast<double>(epoch_steps) * row.step.median;

  row.machine_cpu_percent = measured.resources.mean_system_cpu_percent;
  if (measured.resources.samples > 0) {
    const double online = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
    row.other_cpu_cores = std::max(
        0.0,
        (row.machine_cpu_percent * online - measured.resources.mean_process_cpu_percent) / 100.0);
  }
  if (device.type == DeviceType::cpu) {
    const CpuPeaks& peaks = calibrate_cpu(row.threads);
    row.peak_flops = precision == Precision::fp32 ? peaks.fp32_flops : peaks.bf16_flops;
    row.memory_bandwidth = peaks.memory_bandwidth;
    row.peak_source = "measured: best " + std::string(precision_name(precision)) +
                      " 512x512 matmul and streaming add on " + std::to_string(row.threads) +
                      " threads";
    row.device_utilization_percent =
        std::min(100.0, measured.resources.mean_process_cpu_percent / row.threads);
  } else {
    if (const HardwareSpec* spec = find_hardware(choice.name)) {
      row.peak_flops = peak_flops(*spec, precision);
      row.memory_bandwidth = spec->memory_bandwidth;
      row.peak_source = spec->name + ": " + spec->source;
    } else {
      row.peak_source = "no published rate for " + choice.name + " in the table";
    }
    for (const observe::ResourceSummary::Gpu& gpu : measured.resources.gpus) {
      if (gpu.index == device.index) row.device_utilization_percent = gpu.mean_utilization_percent;
    }
  }
  if (row.peak_flops > 0) row.mfu = row.flops_per_step / row.step.median / row.peak_flops;
  const auto quote = options.prices.quote(
      device.type == DeviceType::cpu ? std::string("cpu") : choice.name, row.threads);
  if (quote) {
    row.price_per_hour = quote->per_hour;
    row.price_source = quote->source;
    row.cost = cost_of(quote->per_hour, row.step.median, batch, row.epoch_examples);
  } else {
    // Said beside the "-" of its cost cells: which entry the table lacks.
    row.price_source = std::string("no price: no entry of the price table matches '") +
                       (device.type == DeviceType::cpu ? "cpu" : choice.name) +
                       "', so its costs show as -; add one to --prices (tandem bench "
                       "--print-prices shows the form)";
  }
  return row;
}

std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text)
    quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string last_line(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  std::string last;
  while (std::getline(lines, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

}  // namespace

std::string xla_platform_of(const std::string& spec) {
  if (spec == "xla-cpu") return "cpu";
  if (spec == "xla-gpu") return "gpu";
  if (spec == "tpu") return "tpu";
  return "";
}

namespace {

// An XLA platform as a bench device: whether its plugin is there (a TPU only where one is on the
// PCI bus); the strategy itself starts when the row is measured.
DeviceChoice xla_choice(const std::string& spec, const std::string& platform) {
  DeviceChoice choice{.spec = spec, .device = Device::cpu(), .xla_platform = platform};
  if (!xla::build_info().built) {
    choice.unavailable = xla::build_info().reason;
  } else if (platform == "tpu") {
    const distribute::TpuInfo tpu = distribute::discover_tpu();
    if (!tpu.usable()) choice.unavailable = "no TPU: " + tpu.reason;
    choice.name =
        tpu.chips.empty() ? "TPU" : "TPU (" + std::to_string(tpu.chips.size()) + " chips)";
  } else if (distribute::pjrt_plugin_candidates(platform).empty()) {
    choice.unavailable = platform == "cpu" ? "no XLA:CPU plugin: run scripts/fetch-pjrt.sh"
                                           : "no XLA:GPU plugin: pip install jax-cuda13-pjrt";
  }
  if (choice.name.empty()) choice.name = platform == "cpu" ? "XLA:CPU" : "XLA:GPU";
  return choice;
}

}  // namespace

std::vector<DeviceChoice> resolve_devices(const std::vector<std::string>& specs) {
  std::vector<DeviceChoice> choices;
  const auto add = [&](DeviceChoice choice) {
    for (const DeviceChoice& existing : choices) {
      if (existing.spec == choice.spec) return;
    }
    choices.push_back(std::move(choice));
  };
  const auto add_gpu = [&](int index) {
    DeviceChoice choice;
    choice.spec = "cuda:" + std::to_string(index);
    const cuda::Status& status = cuda::status();
    if (!status.available) {
      choice.unavailable = "no CUDA device: " + status.reason;
    } else if (index >= static_cast<int>(status.devices.size())) {
      choice.unavailable = "no " + choice.spec + " here (" + std::to_string(status.devices.size()) +
                           " GPUs: cuda:0 to cuda:" + std::to_string(status.devices.size() - 1) +
                           ")";
    } else {
      choice.device = Device::cuda(index);
      choice.name = status.devices[index].name;
    }
    add(std::move(choice));
  };
  for (const std::string& spec : specs) {
    if (const std::string platform = xla_platform_of(spec); !platform.empty()) {
      add(xla_choice(spec, platform));
      continue;
    }
    if (spec == "all") {
      add({"cpu", Device::cpu(), "", ""});
      const cuda::Status& status = cuda::status();
      if (!status.available || status.devices.empty()) {
        add({"cuda", std::nullopt, "", "no CUDA device: " + status.reason});
      }
      for (const cuda::DeviceProperties& gpu : status.devices)
        add_gpu(gpu.index);
      continue;
    }
    const Device device = Device::parse(spec);
    if (device.type == DeviceType::cpu) {
      add({"cpu", device, "", ""});
    } else {
      add_gpu(device.index);
    }
  }
  return choices;
}

std::string precision_unsupported(const DeviceChoice& choice, Precision precision) {
  if (precision != Precision::bf16 || !choice.device || choice.device->type != DeviceType::cuda)
    return "";
  for (const cuda::DeviceProperties& gpu : cuda::status().devices) {
    if (gpu.index == choice.device->index && gpu.major < 8) {
      return "bf16 needs compute capability 8.0 or newer; " + gpu.name + " has " +
             std::to_string(gpu.major) + "." + std::to_string(gpu.minor);
    }
  }
  return "";
}

double roofline_seconds(const std::vector<OpWork>& ops, double peak, double bandwidth,
                        double min_op_seconds) {
  if (!(peak > 0) || !(bandwidth > 0))
    throw InvalidArgument("bench::roofline_seconds: the peak rate and bandwidth must be positive");
  double seconds = 0.0;
  for (const OpWork& op : ops)
    seconds += std::max({op.flops / peak, op.bytes / bandwidth, min_op_seconds * op.calls});
  return seconds;
}

void add_estimates(Report& report, const std::vector<std::string>& keys, const PriceTable& prices) {
  if (keys.empty()) return;
  const bool all = std::find(keys.begin(), keys.end(), "all") != keys.end();
  for (const std::string& key : keys) {
    if (key == "all") continue;
    const bool known =
        std::any_of(hardware_table().begin(), hardware_table().end(),
                    [&](const HardwareSpec& spec) { return lower(spec.key) == lower(key); });
    if (!known) {
      std::string choices;
      for (const HardwareSpec& spec : hardware_table())
        choices += (choices.empty() ? "" : ", ") + spec.key;
      throw InvalidArgument("no published figures for '" + key + "' to estimate; choose from " +
                            choices + " or all");
    }
  }
  // One calibration row per configuration: a measured GPU where there is one (closer to the
  // hardware estimated), else the CPU.
  std::map<std::string, std::size_t> calibration;
  std::vector<std::string> present;
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const Row& row = report.rows[i];
    if (row.kind != "measured" || row.ops.empty()) continue;
    present.push_back(row.device_name);
    const std::string key = row.model + "|" + row.precision + "|" + std::to_string(row.batch_size);
    const auto found = calibration.find(key);
    if (found == calibration.end() ||
        (report.rows[found->second].device == "cpu" && row.device != "cpu")) {
      calibration[key] = i;
    }
  }
  std::vector<Row> estimates;
  for (const auto& [key, index] : calibration) {
    const Row measured = report.rows[index];
    const std::string what_base = measured.model + " " + measured.precision + " batch " +
                                  std::to_string(measured.batch_size) + " on ";
    if (!(measured.peak_flops > 0) || !(measured.memory_bandwidth > 0)) {
      report.skipped.push_back(
          {"estimate", what_base + "other hardware",
           "no peak rate for " + measured.device + " to calibrate the roofline against"});
      continue;
    }
    const double present_roofline =
        roofline_seconds(measured.ops, measured.peak_flops, measured.memory_bandwidth);
    // No device beats its roofline: a ratio below 1 means the model overstated the measured
    // device's bytes (operands that stayed in its caches), which says nothing about others.
    const double ratio = std::max(1.0, measured.step.median / present_roofline);
    const Precision precision = parse_precision(measured.precision);
    for (const HardwareSpec& spec : hardware_table()) {
      const bool wanted = all || std::any_of(keys.begin(), keys.end(), [&](const std::string& k) {
                            return lower(k) == lower(spec.key);
                          });
      if (!wanted) continue;
      const bool is_present =
          std::any_of(present.begin(), present.end(), [&](const std::string& n) {
            return lower(n).find(lower(spec.key)) != std::string::npos;
          });
      if (is_present) continue;  // measured, not estimated
      const double peak = peak_flops(spec, precision);
      if (!(peak > 0)) {
        report.skipped.push_back(
            {"estimate", what_base + spec.key,
             std::string(precision_name(precision)) + ": " +
                 (precision == Precision::fp32
                      ? spec.fp32_note
                      : "no bf16 on " + spec.name + " (" + spec.fp32_note + ")")});
        continue;
      }
      Row row;
      row.kind = "estimate";
      row.framework = "tandem";
      row.framework_version = measured.framework_version;
      row.model = measured.model;
      row.device = spec.key;
      row.device_name = spec.name;
      row.precision = measured.precision;
      row.batch_size = measured.batch_size;
      row.roofline_step_seconds =
          roofline_seconds(measured.ops, peak, spec.memory_bandwidth, spec.min_op_seconds);
      row.calibration_ratio = ratio;
      row.calibrated_on =
          measured.device + (measured.device_name.empty() ? "" : " (" + measured.device_name + ")");
      const double step = row.roofline_step_seconds * ratio;
      row.step = summarize({step});
      row.samples_per_second = static_cast<double>(row.batch_size) / step;
      row.epoch_examples = measured.epoch_examples;
      row.epoch_seconds_projected =
          static_cast<double>((row.epoch_examples + row.batch_size - 1) / row.batch_size) * step;
      row.flops_per_step = measured.flops_per_step;
      row.bytes_per_step = measured.bytes_per_step;
      row.peak_flops = peak;
      row.memory_bandwidth = spec.memory_bandwidth;
      row.peak_source = spec.source;
      row.mfu = row.flops_per_step / step / peak;
      if (const auto quote = prices.quote(spec.key, 1)) {
        row.price_per_hour = quote->per_hour;
        row.price_source = quote->source;
        row.cost = cost_of(quote->per_hour, step, row.batch_size, row.epoch_examples);
      }
      estimates.push_back(std::move(row));
    }
  }
  for (Row& row : estimates)
    report.rows.push_back(std::move(row));
}

PeerOutcome run_peer(const BenchOptions& options, const std::string& framework,
                     const Row& tandem_row) {
  // run_peer.py runs on the CPU or on the first GPU it sees: a GPU row's peer sees only that GPU;
  // an XLA:CPU row's peer runs on the CPU, where TensorFlow's XLA (tf-xla) is its match.
  if (tandem_row.device == "tpu" || tandem_row.device == "xla-gpu") {
    return {std::nullopt, "run_peer.py runs on the CPU or a CUDA GPU; no peer for " +
                              tandem_row.device + " rows"};
  }
  const Device device =
      tandem_row.device == "xla-cpu" ? Device::cpu() : Device::parse(tandem_row.device);
  if (device.type != DeviceType::cpu && device.type != DeviceType::cuda) {
    return {std::nullopt,
            "run_peer.py runs on the CPU or a CUDA GPU; no peer for " + tandem_row.device};
  }
  if (!std::filesystem::exists(options.peer_script)) {
    return {std::nullopt, options.peer_script +
                              " not found (run from Tandem's source folder or pass "
                              "--peer-script)"};
  }
  if (options.peer_python.find('/') != std::string::npos &&
      !std::filesystem::exists(options.peer_python)) {
    return {std::nullopt, options.peer_python +
                              " not found (scripts/python-env.sh bench creates it; or pass "
                              "--peer-python)"};
  }
  const Workload workload = bench::workload(tandem_row.model, options.workload);
  char error_path[] = "/tmp/tandem-bench-peer-XXXXXX";
  const int error_fd = mkstemp(error_path);
  if (error_fd < 0) throw IoError("cannot create a temporary file in /tmp for the peer's errors");
  close(error_fd);
  std::string command = (device.type == DeviceType::cuda
                             ? "CUDA_VISIBLE_DEVICES=" + std::to_string(device.index) + " "
                             : std::string()) +
                        "timeout " + std::to_string(options.peer_timeout_seconds) + " " +
                        shell_quote(options.peer_python) + " " + shell_quote(options.peer_script) +
                        " --framework " + shell_quote(framework == "tf-xla" ? "tf" : framework) +
                        (framework == "tf-xla" ? " --jit-compile" : "") + " --model " +
                        shell_quote(tandem_row.model) + " --batch-size " +
                        std::to_string(tandem_row.batch_size) + " --precision " +
                        shell_quote(tandem_row.precision) + " --warmup-steps " +
                        std::to_string(std::max(options.warmup_steps, 1)) + " --steps " +
                        std::to_string(std::max<std::size_t>(tandem_row.step.count, 1)) +
                        " --threads " + std::to_string(tandem_row.threads);
  if (workload.model == "resnet50")
    command += " --image-size " + std::to_string(workload.example_shape[0]);
  if (workload.model == "transformer")
    command += " --sequence-length " + std::to_string(workload.example_shape[0]);
  command += " --classes " + std::to_string(workload.classes);
  command += device.type == DeviceType::cuda ? " --device cuda" : " --device cpu";
  command += " 2>" + shell_quote(error_path);
  std::string output;
  int status = -1;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buffer[4096];
    std::size_t read = 0;
    while ((read = fread(buffer, 1, sizeof buffer, pipe)) > 0)
      output.append(buffer, read);
    status = pclose(pipe);
  }
  std::ifstream error_file(error_path);
  std::stringstream error_text;
  error_text << error_file.rdbuf();
  std::filesystem::remove(error_path);
  const std::string why = last_line(error_text.str());
  const int exit_code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (exit_code == 3) return {std::nullopt, framework + " is not installed: " + why};
  if (exit_code == 4) return {std::nullopt, "not supported by " + framework + ": " + why};
  if (exit_code == 124) {
    return {std::nullopt, framework + " did not finish within " +
                              std::to_string(options.peer_timeout_seconds) + " s (--peer-timeout)"};
  }
  if (exit_code != 0) {
    return {std::nullopt, framework + " failed (exit status " + std::to_string(exit_code) +
                              "): " + (why.empty() ? "no message" : why)};
  }
  try {
    const nlohmann::json result = nlohmann::json::parse(last_line(output));
    Row row;
    row.kind = "peer";
    row.framework = framework == "tf-xla" ? framework : result.at("framework").get<std::string>();
    row.framework_version = result.value("version", "");
    row.model = tandem_row.model;
    row.device = tandem_row.device;
    row.device_name = tandem_row.device_name;
    row.precision = tandem_row.precision;
    row.batch_size = tandem_row.batch_size;
    row.threads = result.value("threads", tandem_row.threads);
    row.step_seconds = result.at("step_seconds").get<std::vector<double>>();
    row.step = summarize(row.step_seconds);
    row.samples_per_second = result.at("samples_per_second").get<double>();
    if (!(row.samples_per_second > 0)) throw InvalidArgument("samples_per_second is not positive");
    row.epoch_examples = tandem_row.epoch_examples;
    row.epoch_seconds_projected =
        static_cast<double>((row.epoch_examples + row.batch_size - 1) / row.batch_size) *
        row.step.median;
    row.tandem_ratio = tandem_row.samples_per_second / row.samples_per_second;
    row.price_per_hour = tandem_row.price_per_hour;
    row.price_source = tandem_row.price_source;
    if (row.price_per_hour >= 0) {
      row.cost = cost_of(row.price_per_hour, row.step.median, row.batch_size, row.epoch_examples);
    }
    return {row, ""};
  } catch (const std::exception& error) {
    return {std::nullopt, framework +
                              " printed no result line run_peer.py's contract "
                              "describes (" +
                              error.what() + ")"};
  }
}

Report run(const BenchOptions& options, std::ostream& log) {
  if (options.threads > 0) set_num_threads(options.threads);
  Report report;
  report.created = utc_now();
  report.host = host_name();
  report.cpu = options.cpu_name;
  report.tandem_version = version();
  report.command = options.command;
  report.prices_origin = options.prices.flat_per_hour ? "--price-per-hour" : options.prices.origin;
  report.currency = options.prices.currency;
  // Said before the first measurement, which the other work would slow.
  if (const double others = measure_other_runnable_threads(std::chrono::milliseconds(1000));
      others >= kBusyMachineCores) {
    log << "bench: the machine is busy: " << fixed(others, 1)
        << " other runnable threads on average over 1 s, on " << usable_cpu_cores()
        << " usable cores; figures measured now are not comparable with a quiet machine's (each "
           "row's other_cpu_cores says how busy it was)\n";
  }
  const std::vector<DeviceChoice> devices = resolve_devices(options.devices);
  std::vector<Precision> precisions;
  for (const std::string& text : options.precisions)
    precisions.push_back(parse_precision(text));
  for (const std::string& model : options.models) {
    const Workload workload = bench::workload(model, options.workload);
    for (const DeviceChoice& choice : devices) {
      for (const Precision precision : precisions) {
        for (const std::int64_t batch : options.batch_sizes) {
          const std::string what = describe(model, precision, batch, choice.spec);
          std::string reason = choice.unavailable;
          if (reason.empty()) reason = precision_unsupported(choice, precision);
          if (!reason.empty()) {
            report.skipped.push_back({"measured", what, reason});
            log << "bench: skipped " << what << ": " << reason << "\n";
            continue;
          }
          log << "bench: " << what << " ..." << std::flush;
          try {
            DeviceChoice named = choice;
            if (named.device->type == DeviceType::cpu) named.name = options.cpu_name;
            Row row = measure(options, workload, named, precision, batch);
            log << " " << row.samples_per_second << " samples/s, " << row.training_step << " step";
            if (row.compile_seconds >= 0) {
              log << " (compiled in " << row.compile_seconds << " s, first step "
                  << row.first_step_seconds << " s)";
            }
            log << "\n";
            report.rows.push_back(std::move(row));
          } catch (const OutOfMemory& error) {
            log << " out of memory\n";
            report.skipped.push_back(
                {"measured", what, std::string("out of memory: ") + error.what()});
          }
        }
      }
    }
  }
  // An XLA row's step runs inside the plugin, where Tandem's profiler sees no op: its work is the
  // same model's on the same batch, counted on the eager row of its configuration.
  for (Row& row : report.rows) {
    if (!row.ops.empty() || xla_platform_of(row.device).empty()) continue;
    for (const Row& eager : report.rows) {
      if (eager.ops.empty() || !xla_platform_of(eager.device).empty() || eager.model != row.model ||
          eager.precision != row.precision || eager.batch_size != row.batch_size) {
        continue;
      }
      row.ops = eager.ops;
      row.flops_per_step = eager.flops_per_step;
      row.bytes_per_step = eager.bytes_per_step;
      if (row.peak_flops > 0) row.mfu = row.flops_per_step / row.step.median / row.peak_flops;
      break;
    }
  }
  for (const std::string& framework : options.peers) {
    const std::size_t rows = report.rows.size();
    for (std::size_t i = 0; i < rows; ++i) {
      const Row tandem_row = report.rows[i];
      if (tandem_row.kind != "measured") continue;
      const std::string what = framework + " " + tandem_row.model + " " + tandem_row.precision +
                               " batch " + std::to_string(tandem_row.batch_size) + " on " +
                               tandem_row.device;
      log << "bench: peer " << what << " ..." << std::flush;
      PeerOutcome outcome = run_peer(options, framework, tandem_row);
      if (outcome.row) {
        log << " " << outcome.row->samples_per_second << " samples/s\n";
        report.rows.push_back(std::move(*outcome.row));
      } else {
        log << " skipped: " << outcome.skipped_reason << "\n";
        report.skipped.push_back({"peer", what, outcome.skipped_reason});
      }
    }
  }
  add_estimates(report, options.estimates, options.prices);
  rank(report);
  return report;
}

}  // namespace tandem::bench
