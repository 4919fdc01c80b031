// A training run's observers, wired from its settings: TensorBoard logs, the resource monitor
// and the op profiler, as callbacks of its fit.
#include <iostream>

#include "core/text.h"
#include "tandem/observe.h"

namespace tandem::observe {
namespace {

// "412.3 MiB" below a GiB, "3.2 GiB" from there: a process's memory.
std::string memory_text(std::int64_t bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  if (bytes < (std::int64_t{1} << 30)) return fixed(static_cast<double>(bytes) / kMiB, 1) + " MiB";
  return format_bytes(bytes);
}

}  // namespace

RunObservers::RunObservers(const RunObserverOptions& options, RunDescription run, SettingName name)
    : options_(options), name_(std::move(name)) {
  if (!options.logdir.empty()) {
    // One guard for the logs of one folder: a full disk there is reported once.
    log_guard_ = std::make_shared<LogGuard>("the logs in " + options.logdir);
    TensorBoardOptions board;
    board.log_dir = options.logdir;
    board.writer.guard = log_guard_;
    board.update_freq = options.log_every;
    board.histogram_freq = static_cast<int>(options.histogram_freq);
    board.hparams = run.hparams;
    board.config_text = run.config_text;
    board.sample_batch = run.sample_batch;
    tensorboard_ = std::make_shared<TensorBoard>(std::move(board));
    callbacks_.push_back(tensorboard_);
    if (options.monitor_interval > 0.0) {
      ResourceMonitorOptions monitor;
      monitor.interval_seconds = options.monitor_interval;
      monitor.csv_path = options.logdir + "/monitor.csv";
      monitor.writer = tensorboard_->run_writer();
      monitor.guard = log_guard_;
      monitor_ = std::make_unique<ResourceMonitor>(std::move(monitor));
      monitor_->start();
    }
  }
  if (options.profile || options.log_device_placement) {
    if (options.profile) {
      trace_path_ = !options.trace_path.empty() ? options.trace_path
                    : !options.logdir.empty()   ? options.logdir + "/trace.json"
                                                : "tandem-trace.json";
    }
    profiler_ = std::make_shared<Profiler>(ProfilerOptions{
        .log_device_placement = options.log_device_placement, .expected_device = run.device});
    // Last of these callbacks, so that a step's span starts after the others' per-step work.
    profiler_callback_ = std::make_shared<ProfilerCallback>(profiler_, options.profile_first,
                                                            options.profile_last, trace_path_);
    callbacks_.push_back(profiler_callback_);
  }
}

RunObservers::~RunObservers() = default;

std::string RunObservers::trace_path() const {
  return profiler_callback_ && profiler_callback_->trace_written() ? trace_path_ : "";
}

void RunObservers::log_test_results(const train::Logs& results) {
  if (!tensorboard_) return;
  for (const auto& [name, value] : results)
    tensorboard_->run_writer()->add_scalar("test_" + name, value, 0);
}

void RunObservers::finish(std::ostream& out) {
  if (monitor_) {
    monitor_->stop();
    out << monitor_summary_line(monitor_->summary(), monitor_->gpu_status()) << "\n";
  }
  if (tensorboard_) {
    tensorboard_->run_writer()->flush();
    if (log_guard_->stopped()) {
      out << "logs: " << options_.logdir
          << " (incomplete: logging stopped during the run: " << log_guard_->failure() << ")\n";
    } else {
      out << "logs: " << options_.logdir << " (view them with: tensorboard --logdir "
          << options_.logdir << ")\n";
    }
  }
  if (!profiler_callback_) return;
  if (!profiler_callback_->finished()) {
    out << "profile: no step was profiled: training ended before step " << options_.profile_first
        << "; pass an earlier " << name_("profile-steps") << ", e.g. 0:4\n";
    return;
  }
  if (!options_.profile) return;
  out << profiler_->report().table();
  if (profiler_callback_->trace_written()) {
    out << "trace: " << trace_path_ << " (open it at https://ui.perfetto.dev)\n";
  } else {
    out << "trace: not written (see the warning above)\n";
  }
}

std::string monitor_summary_line(const ResourceSummary& summary, const std::string& gpu_status) {
  std::string line = "monitor: " + plural(summary.samples, "sample") + " over " +
                     fixed(summary.seconds, 1) + " s: process CPU " +
                     fixed(summary.mean_process_cpu_percent, 0) + "% mean (" +
                     fixed(summary.peak_process_cpu_percent, 0) + "% peak), RSS " +
                     memory_text(summary.peak_rss_bytes) + " peak, machine CPU " +
                     fixed(summary.mean_system_cpu_percent, 0) + "% mean";
  if (summary.gpus.empty()) return line + "; GPUs: " + gpu_status;
  for (const ResourceSummary::Gpu& gpu : summary.gpus) {
    line += "; GPU " + std::to_string(gpu.index) + " (" + gpu.name +
            "): " + fixed(gpu.mean_utilization_percent, 0) + "% mean utilisation (" +
            fixed(gpu.peak_utilization_percent, 0) + "% peak), " +
            memory_text(gpu.peak_memory_used_bytes) + " peak memory, " +
            fixed(gpu.peak_power_watts, 0) + " W and " + fixed(gpu.peak_temperature_celsius, 0) +
            " C peak";
  }
  return line;
}

}  // namespace tandem::observe
