// The resource monitor: a thread that samples the watched processes' CPU and memory, the
// machine's CPU and every NVIDIA GPU (through NVML, loaded at run time) at a fixed interval, and
// hands each sample to a CSV file and a SummaryWriter.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/files.h"
#include "observe/nvml.h"
#include "observe/process_stats.h"
#include "tandem/observe.h"

namespace tandem::observe {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

double steady_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A CSV cell: empty for a figure the device does not report.
std::string cell(double value) {
  if (!std::isfinite(value)) return "";
  std::ostringstream out;
  out << std::setprecision(10) << value;
  return out.str();
}

std::string cell(std::int64_t value) {
  return value < 0 ? "" : std::to_string(value);
}

}  // namespace

struct ResourceMonitor::Impl {
  ResourceMonitorOptions options;
  int pid = 0;
  Nvml nvml;

  mutable std::mutex mutex;  // everything below
  std::condition_variable wake;
  std::thread thread;
  bool running = false;
  bool stopping = false;
  std::unique_ptr<FileDescriptor> csv;  // null: no CSV (none asked for, or not yet opened)
  double start_steady = 0.0;
  // The previous reading, the baseline of the next sample's CPU percentages.
  double previous_steady = 0.0;
  double previous_cpu_seconds = 0.0;
  std::optional<SystemTimes> previous_system;
  std::int64_t count = 0;
  ResourceSummary totals;  // sums in the mean fields until summary() divides

  explicit Impl(ResourceMonitorOptions given)
      : options(std::move(given)), nvml(options.nvml_library) {
    if (!options.guard) options.guard = std::make_shared<LogGuard>("the resource monitor's logs");
  }

  // Reads everything now; `mutex` held.
  ResourceSample take_sample() {
    const double now = steady_now();
    ResourceSample sample;
    sample.wall_time = unix_seconds();
    sample.elapsed_seconds = now - start_steady;
    if (const std::optional<ProcessTimes> times =
            read_process_times(pid, options.include_children)) {
      if (now > previous_steady) {
        sample.process_cpu_percent = 100.0 *
                                     std::max(0.0, times->cpu_seconds - previous_cpu_seconds) /
                                     (now - previous_steady);
      }
      previous_cpu_seconds = times->cpu_seconds;
      sample.rss_bytes = times->rss_bytes;
    }
    if (const std::optional<SystemTimes> system = read_system_times()) {
      if (previous_system && system->total > previous_system->total) {
        sample.system_cpu_percent = 100.0 * (system->busy - previous_system->busy) /
                                    (system->total - previous_system->total);
      }
      previous_system = system;
    }
    previous_steady = now;
    sample.gpus = nvml.sample();
    return sample;
  }

  // Sets the baseline without recording a sample; `mutex` held.
  void take_baseline() {
    start_steady = steady_now();
    previous_steady = start_steady;
    if (const std::optional<ProcessTimes> times =
            read_process_times(pid, options.include_children)) {
      previous_cpu_seconds = times->cpu_seconds;
    }
    previous_system = read_system_times();
  }

  // Creates the CSV with its header row. A failure here throws: it comes before the run.
  void open_csv() {
    if (options.csv_path.empty()) return;
    auto file = std::make_unique<FileDescriptor>(
        ::open(options.csv_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (file->get() < 0) {
      throw IoError("cannot create the monitor's CSV " + options.csv_path + ": " +
                    describe_errno(errno));
    }
    std::string header =
        "wall_time,elapsed_seconds,process_cpu_percent,rss_bytes,system_cpu_percent";
    for (int gpu = 0; gpu < nvml.device_count(); ++gpu) {
      const std::string prefix = ",gpu" + std::to_string(gpu) + "_";
      header += prefix + "utilization_percent" + prefix + "memory_used_bytes" + prefix +
                "memory_total_bytes" + prefix + "power_watts" + prefix + "temperature_celsius";
    }
    write_all(file->get(), as_bytes(header + "\n"), options.csv_path);
    csv = std::move(file);
  }

  static std::span<const std::uint8_t> as_bytes(const std::string& text) {
    return {reinterpret_cast<const std::uint8_t*>(text.data()), text.size()};
  }

  std::string csv_row(const ResourceSample& sample) const {
    std::ostringstream row;
    row << std::fixed << std::setprecision(3) << sample.wall_time << std::defaultfloat << ","
        << cell(sample.elapsed_seconds) << "," << cell(sample.process_cpu_percent) << ","
        << cell(sample.rss_bytes) << "," << cell(sample.system_cpu_percent);
    for (const GpuSample& gpu : sample.gpus) {
      row << "," << cell(gpu.utilization_percent) << "," << cell(gpu.memory_used_bytes) << ","
          << cell(gpu.memory_total_bytes) << "," << cell(gpu.power_watts) << ","
          << cell(gpu.temperature_celsius);
    }
    row << "\n";
    return row.str();
  }

  // Writes the sample out and adds it to the summary; `mutex` held. The summary gets every
  // sample even after the logs have stopped.
  void record(const ResourceSample& sample) {
    const std::int64_t index = count++;
    options.guard->run([&] {
      // One write(2) per row: a crash loses no sample.
      if (csv) write_all(csv->get(), as_bytes(csv_row(sample)), options.csv_path);
      if (options.writer) write_scalars(sample, index);
    });
    add_to_summary(sample);
  }

  void write_scalars(const ResourceSample& sample, std::int64_t index) {
    SummaryWriter& writer = *options.writer;
    const auto add = [&](const std::string& tag, double value) {
      if (std::isfinite(value)) writer.add_scalar(tag, value, index, sample.wall_time);
    };
    const std::string& prefix = options.tag_prefix;
    add(prefix + "process_cpu_percent", sample.process_cpu_percent);
    add(prefix + "rss_mib", static_cast<double>(sample.rss_bytes) / kMiB);
    add(prefix + "system_cpu_percent", sample.system_cpu_percent);
    for (const GpuSample& gpu : sample.gpus) {
      const std::string gpu_prefix = prefix + "gpu" + std::to_string(gpu.index) + "/";
      add(gpu_prefix + "utilization_percent", gpu.utilization_percent);
      if (gpu.memory_used_bytes >= 0) {
        add(gpu_prefix + "memory_used_mib", static_cast<double>(gpu.memory_used_bytes) / kMiB);
      }
      add(gpu_prefix + "power_watts", gpu.power_watts);
      add(gpu_prefix + "temperature_celsius", gpu.temperature_celsius);
    }
  }

  void add_to_summary(const ResourceSample& sample) {
    ResourceSummary& sum = totals;
    ++sum.samples;
    sum.seconds = sample.elapsed_seconds;
    sum.mean_process_cpu_percent += sample.process_cpu_percent;
    sum.peak_process_cpu_percent =
        std::max(sum.peak_process_cpu_percent, sample.process_cpu_percent);
    sum.peak_rss_bytes = std::max(sum.peak_rss_bytes, sample.rss_bytes);
    sum.mean_system_cpu_percent += sample.system_cpu_percent;
    for (const GpuSample& gpu : sample.gpus) {
      if (sum.gpus.size() <= static_cast<std::size_t>(gpu.index)) {
        sum.gpus.resize(static_cast<std::size_t>(gpu.index) + 1);
      }
      ResourceSummary::Gpu& peak = sum.gpus[static_cast<std::size_t>(gpu.index)];
      peak.index = gpu.index;
      peak.name = gpu.name;
      if (std::isfinite(gpu.utilization_percent)) {
        peak.mean_utilization_percent += gpu.utilization_percent;
        peak.peak_utilization_percent =
            std::max(peak.peak_utilization_percent, gpu.utilization_percent);
      }
      peak.peak_memory_used_bytes = std::max(peak.peak_memory_used_bytes, gpu.memory_used_bytes);
      if (std::isfinite(gpu.power_watts)) {
        peak.peak_power_watts = std::max(peak.peak_power_watts, gpu.power_watts);
      }
      if (std::isfinite(gpu.temperature_celsius)) {
        peak.peak_temperature_celsius =
            std::max(peak.peak_temperature_celsius, gpu.temperature_celsius);
      }
    }
  }

  void run() {
    const auto interval = std::chrono::duration<double>(options.interval_seconds);
    auto next = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex);
    while (true) {
      // Ticks on a fixed schedule, so samples stay one interval apart however long one takes.
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(interval);
      if (wake.wait_until(lock, next, [&] { return stopping; })) return;
      record(take_sample());
    }
  }
};

ResourceMonitor::ResourceMonitor(ResourceMonitorOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  const ResourceMonitorOptions& given = impl_->options;
  if (!(given.interval_seconds > 0.0) || !std::isfinite(given.interval_seconds)) {
    throw InvalidArgument("ResourceMonitor: interval_seconds must be a positive number, got " +
                          std::to_string(given.interval_seconds));
  }
  impl_->pid = given.pid > 0 ? given.pid : static_cast<int>(getpid());
  if (!read_process_times(impl_->pid, false)) {
    throw InvalidArgument("ResourceMonitor: no process " + std::to_string(impl_->pid) +
                          " to watch (or /proc cannot be read)");
  }
}

ResourceMonitor::~ResourceMonitor() {
  try {
    stop();
  } catch (const std::exception& error) {
    std::cerr << "tandem: warning: the resource monitor did not stop cleanly: " << error.what()
              << "\n";
  }
}

void ResourceMonitor::start() {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  if (impl.running) return;
  if (!impl.csv) impl.open_csv();
  impl.take_baseline();
  impl.stopping = false;
  impl.running = true;
  impl.thread = std::thread([&impl] { impl.run(); });
}

void ResourceMonitor::stop() {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    if (!impl.running) return;
    impl.stopping = true;
  }
  impl.wake.notify_all();
  impl.thread.join();
  std::lock_guard lock(impl.mutex);
  impl.running = false;
  impl.record(impl.take_sample());
  if (impl.options.writer) impl.options.guard->run([&] { impl.options.writer->flush(); });
}

ResourceSample ResourceMonitor::sample_now() {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  if (!impl.running && impl.count == 0 && impl.previous_steady == 0.0) {
    if (!impl.csv) impl.open_csv();
    impl.take_baseline();
  }
  ResourceSample sample = impl.take_sample();
  impl.record(sample);
  return sample;
}

ResourceSummary ResourceMonitor::summary() const {
  std::lock_guard lock(impl_->mutex);
  ResourceSummary summary = impl_->totals;
  if (summary.samples > 0) {
    const double count = static_cast<double>(summary.samples);
    summary.mean_process_cpu_percent /= count;
    summary.mean_system_cpu_percent /= count;
    for (ResourceSummary::Gpu& gpu : summary.gpus)
      gpu.mean_utilization_percent /= count;
  }
  return summary;
}

std::string ResourceMonitor::gpu_status() const {
  return impl_->nvml.status();
}

}  // namespace tandem::observe
