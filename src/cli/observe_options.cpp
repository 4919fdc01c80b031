#include "cli/observe_options.h"

#include <cstdlib>
#include <iostream>
#include <limits>
#include <tuple>

#include "cli/format.h"

namespace tandem::cli {
namespace {

// "20:29" or "20" (one step): global steps from 0, inclusive.
std::pair<std::int64_t, std::int64_t> parse_step_range(const std::string& text) {
  const std::size_t colon = text.find(':');
  const std::string first_text = text.substr(0, colon);
  const std::string last_text = colon == std::string::npos ? first_text : text.substr(colon + 1);
  const std::int64_t first =
      static_cast<std::int64_t>(parse_unsigned_integer("--profile-steps", first_text));
  const std::int64_t last =
      static_cast<std::int64_t>(parse_unsigned_integer("--profile-steps", last_text));
  if (last < first) {
    throw UsageError("--profile-steps " + text + ": the last step comes before the first; give " +
                     "FIRST:LAST with FIRST <= LAST, e.g. 20:29");
  }
  return {first, last};
}

// "0", "0.0", ...: the value that turns the monitor off.
bool is_zero(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() && value == 0.0;
}

// "412.3 MiB" below a GiB, "3.2 GiB" from there: a process's memory.
std::string memory_text(std::int64_t bytes) {
  constexpr double kMiB = 1024.0 * 1024.0;
  if (bytes < (std::int64_t{1} << 30)) return fixed(static_cast<double>(bytes) / kMiB, 1) + " MiB";
  return format_bytes(bytes);
}

}  // namespace

const OptionTable<ObserveOptions>& observe_options() {
  using O = ObserveOptions;
  static const OptionTable<O> table(
      {
          {"--logdir", "DIR",
           "write TensorBoard logs to DIR (train/ and validation/ runs, hparams, the model, and "
           "the resource monitor's samples, also as DIR/monitor.csv); view them with tensorboard "
           "--logdir DIR",
           into(&O::logdir, parse_directory)},
          {"--log-every", "N",
           "with --logdir: log the loss, metrics, learning rate, throughput and input-wait share "
           "every N steps as well as every epoch (default 1; 0: per epoch only)",
           into(&O::log_every, parse_unsigned_integer)},
          {"--histogram-freq", "N",
           "with --logdir: weight and gradient histograms every N epochs (default 1; 0: none)",
           [](O& options, const std::string& option, const std::string& text) {
             const std::uint64_t epochs = parse_unsigned_integer(option, text);
             if (epochs > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) {
               throw UsageError(option + " " + text + " is too many epochs; pass at most " +
                                std::to_string(std::numeric_limits<int>::max()));
             }
             options.histogram_freq = static_cast<std::int64_t>(epochs);
           }},
          {"--monitor-interval", "S",
           "with --logdir: sample CPU, memory and GPUs every S seconds (default 1; 0: no monitor)",
           [](O& options, const std::string& option, const std::string& text) {
             options.monitor_interval = is_zero(text) ? 0.0 : parse_positive_number(option, text);
           }},
          {"--profile", "",
           "time every op of the profiled steps; print a table of ops by time with FLOPs and "
           "GFLOP/s and write a Chrome trace for https://ui.perfetto.dev",
           flag(&O::profile)},
          {"--profile-steps", "A:B",
           "the training steps to profile, counted from 0 across epochs (default 20:29)",
           [](O& options, const std::string&, const std::string& text) {
             std::tie(options.profile_first, options.profile_last) = parse_step_range(text);
           }},
          {"--trace", "FILE",
           "where --profile writes its trace (default DIR/trace.json with --logdir, else "
           "tandem-trace.json)",
           into(&O::trace_path, parse_output_path)},
          {"--log-device-placement", "",
           "print the device every op of the profiled steps ran on, and warn when an op falls "
           "back to another device than the training device",
           flag(&O::log_device_placement)},
      },
      {[](O& options, const ParsedArgs& args) {
        for (const char* option : {"--log-every", "--histogram-freq", "--monitor-interval"}) {
          if (args.has(option) && options.logdir.empty()) {
            throw UsageError(std::string(option) + " only matters with --logdir DIR; add --logdir");
          }
        }
        if (args.has("--profile-steps") && !options.profile && !options.log_device_placement) {
          throw UsageError("--profile-steps only matters with --profile or --log-device-placement");
        }
        if (args.has("--trace") && !options.profile) {
          throw UsageError("--trace only matters with --profile; add --profile");
        }
      }});
  return table;
}

Observers::Observers(const ObserveOptions& options, RunDescription run) : options_(options) {
  if (!options.logdir.empty()) {
    // One guard for the logs of one folder: a full disk there is reported once.
    log_guard_ = std::make_shared<observe::LogGuard>("the logs in " + options.logdir);
    observe::TensorBoardOptions board;
    board.log_dir = options.logdir;
    board.writer.guard = log_guard_;
    board.update_freq = options.log_every;
    board.histogram_freq = static_cast<int>(options.histogram_freq);
    board.hparams = run.hparams;
    board.config_text = run.config_text;
    board.sample_batch = run.sample_batch;
    tensorboard_ = std::make_shared<observe::TensorBoard>(std::move(board));
    callbacks_.push_back(tensorboard_);
    if (options.monitor_interval > 0.0) {
      observe::ResourceMonitorOptions monitor;
      monitor.interval_seconds = options.monitor_interval;
      monitor.csv_path = options.logdir + "/monitor.csv";
      monitor.writer = tensorboard_->run_writer();
      monitor.guard = log_guard_;
      monitor_ = std::make_unique<observe::ResourceMonitor>(std::move(monitor));
      monitor_->start();
    }
  }
  if (options.profile || options.log_device_placement) {
    if (options.profile) {
      trace_path_ = !options.trace_path.empty() ? options.trace_path
                    : !options.logdir.empty()   ? options.logdir + "/trace.json"
                                                : "tandem-trace.json";
    }
    profiler_ = std::make_shared<observe::Profiler>(observe::ProfilerOptions{
        .log_device_placement = options.log_device_placement, .expected_device = run.device});
    // Last of these callbacks, so that a step's span starts after the others' per-step work.
    profiler_callback_ = std::make_shared<observe::ProfilerCallback>(
        profiler_, options.profile_first, options.profile_last, trace_path_);
    callbacks_.push_back(profiler_callback_);
  }
}

Observers::~Observers() = default;

std::string Observers::trace_path() const {
  return profiler_callback_ && profiler_callback_->trace_written() ? trace_path_ : "";
}

void Observers::log_test_results(const train::Logs& results) {
  if (!tensorboard_) return;
  for (const auto& [name, value] : results)
    tensorboard_->run_writer()->add_scalar("test_" + name, value, 0);
}

void Observers::finish(std::ostream& out) {
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
        << "; pass an earlier --profile-steps, e.g. 0:4\n";
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

std::string monitor_summary_line(const observe::ResourceSummary& summary,
                                 const std::string& gpu_status) {
  std::string line = "monitor: " + plural(summary.samples, "sample") + " over " +
                     fixed(summary.seconds, 1) + " s: process CPU " +
                     fixed(summary.mean_process_cpu_percent, 0) + "% mean (" +
                     fixed(summary.peak_process_cpu_percent, 0) + "% peak), RSS " +
                     memory_text(summary.peak_rss_bytes) + " peak, machine CPU " +
                     fixed(summary.mean_system_cpu_percent, 0) + "% mean";
  if (summary.gpus.empty()) return line + "; GPUs: " + gpu_status;
  for (const observe::ResourceSummary::Gpu& gpu : summary.gpus) {
    line += "; GPU " + std::to_string(gpu.index) + " (" + gpu.name +
            "): " + fixed(gpu.mean_utilization_percent, 0) + "% mean utilisation (" +
            fixed(gpu.peak_utilization_percent, 0) + "% peak), " +
            memory_text(gpu.peak_memory_used_bytes) + " peak memory, " +
            fixed(gpu.peak_power_watts, 0) + " W and " + fixed(gpu.peak_temperature_celsius, 0) +
            " C peak";
  }
  return line;
}

}  // namespace tandem::cli
