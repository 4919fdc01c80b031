#pragma once
// Seeing inside a run, in the formats the usual viewers read:
//
// - SummaryWriter: TensorBoard event files (scalars, histograms, PNG images, text and the HParams
//   plugin's session records), for custom training loops;
// - TensorBoard: the callback that logs a Model::fit run through a SummaryWriter;
// - ResourceMonitor: a sampling thread recording process CPU and memory and, through NVML loaded
//   at run time, every NVIDIA GPU's utilisation, memory, power and temperature;
// - Profiler: times every op (forward and backward), the input pipeline's waits and the optimizer
//   step; writes a Chrome trace (Perfetto, chrome://tracing) and a table of ops by time with
//   their FLOPs and achieved GFLOP/s.
//
//   observe::SummaryWriter writer("runs/exp1");
//   for (std::int64_t step = 0; ...; ++step) {
//     ...
//     writer.add_scalar("loss", loss.item(), step);
//   }
#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tandem/data.h"
#include "tandem/device.h"
#include "tandem/error.h"
#include "tandem/pruning.h"
#include "tandem/spans.h"
#include "tandem/tensor.h"
#include "tandem/train.h"

namespace tandem::observe {

// ---------------------------------------------------------------------------------------------
// Logs that never stop a run.
// ---------------------------------------------------------------------------------------------
// Logs serve a run; a run does not die for them. Writes of one run's logs go through one guard:
// the first that fails (a full or read-only disk) is reported once on standard error, naming
// the file, what the system said and what stops, and from then on the guard's logs write
// nothing, while training, its results and the saved model go on. Thread-safe (the monitor
// writes from its own thread).
class LogGuard {
 public:
  // `what`: the logs guarded, as the warning names them, e.g. "the TensorBoard logs in runs/a".
  explicit LogGuard(std::string what);
  LogGuard(const LogGuard&) = delete;
  LogGuard& operator=(const LogGuard&) = delete;

  // Runs `write` unless the logs have stopped. An IoError from it stops them (reported the first
  // time); other errors pass through.
  void run(const std::function<void()>& write);
  bool stopped() const;
  // The first failure's message ("" while none), for a run's summary.
  std::string failure() const;
  const std::string& what() const { return what_; }

 private:
  std::string what_;
  mutable std::mutex mutex_;
  std::string failure_;
  std::atomic<bool> stopped_{false};
};

// ---------------------------------------------------------------------------------------------
// TensorBoard event files.
// ---------------------------------------------------------------------------------------------
struct SummaryWriterOptions {
  // Events are buffered in memory and reach the file at least this often (and when the writer
  // is flushed, closed or destroyed, and at process exit), so a crash loses at most this long.
  double flush_seconds = 5.0;
  // Pending bytes that trigger a write before the timer does.
  std::size_t max_pending_bytes = 1 << 20;
  // Appended to the file name (TensorFlow's filename_suffix), e.g. ".v2".
  std::string filename_suffix;
  // Null: a failed write throws IoError from the next call (and the destructor warns). Set:
  // every call after construction runs through the guard, so a failed write is reported once
  // and the writer (with every other one of the guard) writes nothing more.
  std::shared_ptr<LogGuard> guard;
};

// A hyper-parameter value as the HParams plugin shows it: a number, a string or a boolean.
using HParamValue = std::variant<double, std::string, bool>;
using HParams = std::map<std::string, HParamValue>;

// How a session (one run in the HParams table) ended.
enum class SessionStatus { success, failure, running };

// Writes one events.out.tfevents.<seconds>.<host>.<pid>.<n> file in `log_dir`, which TensorBoard
// shows as one run. Thread-safe: the calls serialise the event at once (into a buffer) and a
// background thread writes it. Steps are the x axis of TensorBoard's charts.
class SummaryWriter {
 public:
  // Creates `log_dir` and its parents. Throws IoError naming the folder when it cannot.
  explicit SummaryWriter(const std::string& log_dir, SummaryWriterOptions options = {});
  ~SummaryWriter();
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // wall_time: seconds since the Unix epoch of the measurement (default: now).
  void add_scalar(const std::string& tag, double value, std::int64_t step,
                  std::optional<double> wall_time = std::nullopt);
  // The distribution of `values` (any shape, a floating or integer dtype, on any device) in
  // `buckets` equal-width buckets between its minimum and maximum, as tf.summary.histogram.
  void add_histogram(const std::string& tag, const Tensor& values, std::int64_t step,
                     int buckets = 30);
  // Images (H, W, C) or a batch (N, H, W, C) with C 1 (grey), 3 (RGB) or 4 (RGBA): u8, or
  // floating in [0, 1] (clipped). Each becomes a PNG; a batch shows up as `tag`/image/0, 1, ...
  // (the first max_images of it), as TensorFlow 1 named them.
  void add_image(const std::string& tag, const Tensor& images, std::int64_t step,
                 int max_images = 3);
  // Markdown shown by the Text tab.
  void add_text(const std::string& tag, const std::string& markdown, std::int64_t step);
  // The HParams plugin's record that starts a session: TensorBoard's HParams tab shows one row
  // per log folder that has one, with these values and the last value of every scalar tag of
  // that folder and its subfolders as metrics (point TensorBoard at the parent of several runs
  // to compare them).
  void add_hparams_session_start(const HParams& hparams, const std::string& group_name = "");
  void add_hparams_session_end(SessionStatus status);

  // Writes every pending event to the file now. Throws IoError if a write failed (without a
  // guard; with one, the guard reports it).
  void flush();
  // Flushes and closes the file; later calls throw. The destructor closes too but cannot report
  // a failure.
  void close();

  const std::string& log_dir() const;
  // The event file's path.
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// The TensorBoard callback.
// ---------------------------------------------------------------------------------------------
struct TensorBoardOptions {
  // The run's folder; training scalars go to <log_dir>/train, validation scalars to
  // <log_dir>/validation (as Keras' callback does), and the configuration and hparams session to
  // <log_dir> itself.
  std::string log_dir;
  // > 0: also log the loss, the metrics, the learning rate, the throughput and the input-wait
  // share every this many steps (batch_* tags); 0: per epoch only (epoch_* tags).
  std::int64_t update_freq = 0;
  // Weight histograms (and gradient histograms, given a sample batch) every this many epochs,
  // counted from the first; 0: none.
  int histogram_freq = 1;
  // A batch from the training data: its first max_images inputs are logged as images once
  // (when they are (N, H, W, C) images), and the gradients on it are logged as histograms.
  std::optional<data::Batch> sample_batch;
  int max_images = 3;
  // The run's settings: a table in the Text tab and the HParams session's values.
  HParams hparams;
  // More text for the Text tab under "config" (markdown), e.g. how the run was started.
  std::string config_text;
  SummaryWriterOptions writer;
};

// Logs a Model::fit run for TensorBoard (keras.callbacks.TensorBoard):
//   epoch_loss, epoch_<metric>          per epoch (validation ones in the validation run)
//   epoch_learning_rate                 the optimizer's rate at the end of the epoch
//   epoch_samples_per_sec               examples / seconds of the epoch's training steps
//   epoch_input_wait_share              the fraction of step time spent waiting for a batch
//   batch_*                             the same every update_freq steps
//   weights/<name>, gradients/<name>    histograms every histogram_freq epochs
//   inputs                              the sample batch's images
//   config, model                       the settings and the model summary (Text tab)
// and opens an HParams session with `hparams` that ends when training does (status success, or
// failure when fit exits by an exception). Its writes go through a LogGuard: a full disk stops
// the logs with one warning, never the training.
class TensorBoard final : public train::Callback {
 public:
  bool reads_weights_at_batch_end() const override { return false; }
  // Every update_freq steps, when it writes the batch_ scalars.
  bool reads_logs_at_batch_end(std::int64_t batch) const override;
  explicit TensorBoard(TensorBoardOptions options);
  ~TensorBoard() override;
  void on_train_begin(const train::Logs& logs) override;
  void on_train_end(const train::Logs& logs) override;
  void on_epoch_begin(int epoch, const train::Logs& logs) override;
  void on_epoch_end(int epoch, const train::Logs& logs) override;
  void on_train_batch_begin(std::int64_t batch, const train::Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const train::Logs& logs) override;

  // The writer of <log_dir> itself (text, hparams); a ResourceMonitor may share it.
  const std::shared_ptr<SummaryWriter>& run_writer() const;
  // False once a write of these logs failed: the callback then logs nothing more (and computes
  // no histogram), as its guard (options.writer.guard, made here when not given) says.
  bool logging() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// TF-MOT's PruningSummaries: at the end of every epoch, each pruned layer's sparsity
// (pruning/<layer>/sparsity, the share of its kernel at zero) and the schedule's target
// (pruning/target_sparsity), at the pruning step, in <log_dir>/train beside the training scalars.
class PruningSummaries final : public train::Callback {
 public:
  PruningSummaries(std::shared_ptr<const pruning::Pruning> pruning, const std::string& log_dir);
  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }
  void on_epoch_end(int epoch, const train::Logs& logs) override;

 private:
  std::shared_ptr<const pruning::Pruning> pruning_;
  std::shared_ptr<SummaryWriter> writer_;
};

// The settings and results of a run as a markdown table (the Text tab renders it).
std::string hparams_markdown(const HParams& hparams);

// ---------------------------------------------------------------------------------------------
// Resource monitor.
// ---------------------------------------------------------------------------------------------
struct GpuSample {
  int index = 0;
  std::string name;                  // "NVIDIA H100 80GB HBM3"
  double utilization_percent = 0.0;  // of the sample period the GPU ran a kernel
  std::int64_t memory_used_bytes = 0;
  std::int64_t memory_total_bytes = 0;
  double power_watts = 0.0;
  double temperature_celsius = 0.0;
};

struct ResourceSample {
  double wall_time = 0.0;  // seconds since the Unix epoch
  double elapsed_seconds = 0.0;
  // CPU time of the watched processes over the last interval, in percent of one core (200 is
  // two cores busy).
  double process_cpu_percent = 0.0;
  std::int64_t rss_bytes = 0;  // resident memory of the watched processes
  // The whole machine's CPU use, in percent of all its cores.
  double system_cpu_percent = 0.0;
  std::vector<GpuSample> gpus;
};

struct ResourceMonitorOptions {
  double interval_seconds = 1.0;
  // The process to watch (0: this one), with its descendants when include_children.
  int pid = 0;
  bool include_children = true;
  // Where samples go: a CSV file (one row per sample) and/or a SummaryWriter (scalars under
  // `tag_prefix`, the sample number as the step). Either may be empty.
  std::string csv_path;
  std::shared_ptr<SummaryWriter> writer;
  std::string tag_prefix = "monitor/";
  // The CSV's writes go through it (null: one of the monitor's own): a failed write stops the
  // CSV with one warning while sampling and the summary go on. Share the writer's guard for one
  // warning about one disk.
  std::shared_ptr<LogGuard> guard;
  // The NVML library to load (the driver installs libnvidia-ml.so.1); where it cannot be
  // loaded, the monitor records no GPU and gpu_status() says why.
  std::string nvml_library = "libnvidia-ml.so.1";
};

// Peaks and means over the samples taken.
struct ResourceSummary {
  std::int64_t samples = 0;
  double seconds = 0.0;
  double mean_process_cpu_percent = 0.0;
  double peak_process_cpu_percent = 0.0;
  std::int64_t peak_rss_bytes = 0;
  double mean_system_cpu_percent = 0.0;
  struct Gpu {
    int index = 0;
    std::string name;
    double mean_utilization_percent = 0.0;
    double peak_utilization_percent = 0.0;
    std::int64_t peak_memory_used_bytes = 0;
    double peak_power_watts = 0.0;
    double peak_temperature_celsius = 0.0;
  };
  std::vector<Gpu> gpus;
};

// Samples on a thread of its own from start() to stop() (or destruction).
class ResourceMonitor {
 public:
  explicit ResourceMonitor(ResourceMonitorOptions options = {});
  ~ResourceMonitor();
  ResourceMonitor(const ResourceMonitor&) = delete;
  ResourceMonitor& operator=(const ResourceMonitor&) = delete;

  // Reads the baseline that CPU percentages are measured from and starts the thread; the first
  // sample follows one interval later. Throws IoError when the CSV cannot be created.
  void start();
  // Takes a last sample, stops the thread and flushes the CSV and the writer. Throws nothing:
  // write failures go to the guard.
  void stop();
  // Takes a sample now (also while the thread runs) and records it like the others.
  ResourceSample sample_now();
  ResourceSummary summary() const;
  // How GPUs are watched: "2 GPUs through NVML (driver 550.54.15)", or why none are: "no NVIDIA
  // driver: libnvidia-ml.so.1 not found".
  std::string gpu_status() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Op profiler.
// ---------------------------------------------------------------------------------------------
// What a span of the trace is. Ops are attributed to the innermost forward/backward/optimizer
// span around them ("other" outside any, e.g. metric updates).
using SpanKind = tandem::SpanKind;

// Marks a span of the current thread while a Profiler runs (and costs one atomic load while
// none does). Model::fit opens these itself; a custom loop opens them around its phases:
//   { observe::TraceScope forward(observe::SpanKind::forward); logits = model(x, true); ... }
// The ops layer's SpanScope (tandem/spans.h), which the Profiler observes.
using TraceScope = tandem::SpanScope;

// batches.next() inside an input_wait span, and how long the last one waited: the train layer's
// (tandem/train.h), as Model::fit fetches its batches; for custom loops.
using train::last_input_wait_seconds;
using train::next_batch;

struct ProfilerOptions {
  // Print the device every op ran on as it runs (TensorFlow's log_device_placement).
  bool log_device_placement = false;
  // The device the run is meant to use: an op that runs on another kind of device (the CPU in
  // a GPU run) is a fallback, warned about once per op. Unset: no check.
  std::optional<Device> expected_device;
  // Where placement lines and warnings go (default std::cerr).
  std::ostream* log = nullptr;
};

// One row of the op table: an op in one phase on one device.
struct OpProfile {
  std::string op;     // "conv2d"
  std::string phase;  // "forward", "backward", "optimizer" or "other"
  std::string device;
  std::int64_t calls = 0;
  double seconds = 0.0;
  double flops = 0.0;  // from the op table's cost functions
  double bytes = 0.0;
};

struct ProfileReport {
  // By total time, longest first; with step spans, only the ops that ran inside them.
  std::vector<OpProfile> ops;
  std::int64_t steps = 0;           // step spans seen
  double step_seconds = 0.0;        // their total wall time
  double op_seconds = 0.0;          // all ops, whole profile
  double step_op_seconds = 0.0;     // ops inside step spans, on the step's thread
  double input_wait_seconds = 0.0;  // input_wait spans inside step spans
  // Ops and input waits inside step spans, time covered by both counted once: what the profile
  // explains of the step time (the rest is dispatch, tape bookkeeping and callbacks).
  double step_accounted_seconds = 0.0;
  double optimizer_seconds = 0.0;  // optimizer spans inside step spans (their ops included)
  std::int64_t fallbacks = 0;      // ops that ran off the expected device

  // The table printed by `tandem train --profile`: ops by total time with calls, share of the
  // step time, mean time per call, GFLOP and achieved GFLOP/s, then the input waits, the
  // optimizer step and what the ops leave unexplained.
  std::string table(std::size_t max_rows = 25) const;
};

// Records ops and spans between start() and stop() on every thread. One profiler runs at a time.
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Throws Error when another profiler is running.
  void start();
  void stop();
  bool running() const;
  // Forgets what was recorded.
  void clear();

  ProfileReport report() const;
  // Chrome's trace event format (JSON): open it at https://ui.perfetto.dev or chrome://tracing.
  // Written atomically (no half-written trace under its name); throws IoError naming the file
  // when it cannot be written.
  void write_chrome_trace(const std::string& path) const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Profiles the global training steps [first_step, last_step] of Model::fit (counted from 0
// across epochs): starts the profiler just before the first one's batch is fetched, stops it
// after the last, then writes the trace to `trace_path` (when not empty) and the table to
// `table_out` (when not null).
class ProfilerCallback final : public train::Callback {
 public:
  bool reads_weights_at_batch_end() const override { return false; }
  bool reads_logs_at_batch_end(std::int64_t) const override { return false; }
  ProfilerCallback(std::shared_ptr<Profiler> profiler, std::int64_t first_step,
                   std::int64_t last_step, std::string trace_path = "",
                   std::ostream* table_out = nullptr);
  void on_train_begin(const train::Logs& logs) override;
  void on_epoch_begin(int epoch, const train::Logs& logs) override;
  void on_train_batch_end(std::int64_t batch, const train::Logs& logs) override;
  void on_train_end(const train::Logs& logs) override;

  // Whether a profile was taken (to the last step, or to the end of training if that came first).
  bool finished() const { return finished_; }
  // Whether the trace reached its file. A failed write is a warning (through a LogGuard), not
  // the end of training.
  bool trace_written() const { return trace_written_; }

 private:
  void begin_window();
  void end_window();

  std::shared_ptr<Profiler> profiler_;
  std::int64_t first_step_;
  std::int64_t last_step_;
  std::string trace_path_;
  std::ostream* table_out_;
  std::int64_t global_step_ = 0;  // steps finished so far
  std::int64_t step_start_ns_ = 0;
  bool finished_ = false;
  bool trace_written_ = false;
  LogGuard trace_guard_{"the profiler's trace"};
};

// ---- A training run's observers, wired from its settings ----

struct RunObserverOptions {
  std::string logdir;               // empty: no TensorBoard logs, no monitor
  std::int64_t log_every = 1;       // batch_ scalars every N steps; 0: per epoch only
  std::int64_t histogram_freq = 1;  // epochs between histograms; 0: none
  double monitor_interval = 1.0;    // seconds between the monitor's samples; 0: no monitor
  bool profile = false;             // time every op of the profiled steps
  std::int64_t profile_first = 20;  // global steps, from 0, inclusive
  std::int64_t profile_last = 29;
  std::string trace_path;  // empty: <logdir>/trace.json, or tandem-trace.json
  // Print the device every op of the profiled steps ran on, and warn at a fallback.
  bool log_device_placement = false;
};

// What a run tells its observers about itself.
struct RunDescription {
  HParams hparams;
  std::string config_text;                  // markdown
  std::optional<data::Batch> sample_batch;  // images and gradient histograms
  Device device = Device::cpu();            // the device training is meant to run on
};

// The callbacks and the monitor of one run, from its settings (named by key in messages:
// profile-steps).
class RunObservers {
 public:
  RunObservers(const RunObserverOptions& options, RunDescription run,
               SettingName name = setting_identifier);
  ~RunObservers();
  RunObservers(const RunObservers&) = delete;
  RunObservers& operator=(const RunObservers&) = delete;

  const std::vector<std::shared_ptr<train::Callback>>& callbacks() const { return callbacks_; }
  // With a logdir: the test results as test_<name> scalars of the run, so TensorBoard's HParams
  // table can compare runs by them.
  void log_test_results(const train::Logs& results);
  // Stops the monitor and prints where the logs and the trace are, the monitor's summary and
  // (when profiling) the op table.
  void finish(std::ostream& out);
  // Where the trace went, or "" when none was written.
  std::string trace_path() const;

 private:
  RunObserverOptions options_;
  SettingName name_;
  std::shared_ptr<LogGuard> log_guard_;  // the logs in the logdir
  std::vector<std::shared_ptr<train::Callback>> callbacks_;
  std::shared_ptr<TensorBoard> tensorboard_;
  std::unique_ptr<ResourceMonitor> monitor_;
  std::shared_ptr<Profiler> profiler_;
  std::shared_ptr<ProfilerCallback> profiler_callback_;
  std::string trace_path_;
};

// One line about a monitor's summary: "monitor: 31 samples over 30.2 s: CPU 196% mean ...".
std::string monitor_summary_line(const ResourceSummary& summary, const std::string& gpu_status);

}  // namespace tandem::observe
