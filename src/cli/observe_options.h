#pragma once
// `tandem train`'s options for seeing inside the run: TensorBoard logs (--logdir), the resource
// monitor and the op profiler (--profile), and the callbacks they become.
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "tandem/observe.h"

namespace tandem::cli {

struct ObserveOptions {
  std::string logdir;               // empty: no TensorBoard logs, no monitor
  std::int64_t log_every = 1;       // batch_ scalars every N steps; 0: per epoch only
  std::int64_t histogram_freq = 1;  // epochs between histograms; 0: none
  double monitor_interval = 1.0;    // seconds; 0: no monitor
  bool profile = false;
  std::int64_t profile_first = 20;  // global steps, from 0, inclusive
  std::int64_t profile_last = 29;
  std::string trace_path;  // empty: <logdir>/trace.json, or tandem-trace.json
  bool log_device_placement = false;
};

// The options: their help lines, parsing and checks.
const OptionTable<ObserveOptions>& observe_options();

// What a run tells the observers about itself.
struct RunDescription {
  observe::HParams hparams;
  std::string config_text;                  // markdown
  std::optional<data::Batch> sample_batch;  // images and gradient histograms
  Device device = Device::cpu();            // the device training is meant to run on
};

// The callbacks and the monitor of one run, from the options.
class Observers {
 public:
  Observers(const ObserveOptions& options, RunDescription run);
  ~Observers();
  Observers(const Observers&) = delete;
  Observers& operator=(const Observers&) = delete;

  const std::vector<std::shared_ptr<train::Callback>>& callbacks() const { return callbacks_; }
  // With --logdir: the test results as test_<name> scalars of the run, so TensorBoard's HParams
  // table can compare runs by them.
  void log_test_results(const train::Logs& results);
  // Stops the monitor and prints where the logs and the trace are, the monitor's summary and
  // (with --profile) the op table.
  void finish(std::ostream& out);
  // Where the trace went, or "" when none was written.
  std::string trace_path() const;

 private:
  ObserveOptions options_;
  std::shared_ptr<observe::LogGuard> log_guard_;  // the logs in --logdir
  std::vector<std::shared_ptr<train::Callback>> callbacks_;
  std::shared_ptr<observe::TensorBoard> tensorboard_;
  std::unique_ptr<observe::ResourceMonitor> monitor_;
  std::shared_ptr<observe::Profiler> profiler_;
  std::shared_ptr<observe::ProfilerCallback> profiler_callback_;
  std::string trace_path_;
};

// One line about a monitor's summary: "monitor: 31 samples over 30.2 s: CPU 196% mean ...".
std::string monitor_summary_line(const observe::ResourceSummary& summary,
                                 const std::string& gpu_status);

}  // namespace tandem::cli
