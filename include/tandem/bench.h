#pragma once
// Fair speed and cost comparisons (`tandem bench`): the zoo's models trained on synthetic data of
// their input shape (or a real data set) on every device, precision and batch size asked for,
// warm-up excluded, timed over repeated windows; MFU from the op table's FLOP counts against
// each device's peak rate; cost from a price table; roofline estimates for hardware that is not
// present (always labelled as such); the same workloads in TensorFlow and PyTorch side by side;
// and reports as JSON, CSV, Markdown and a self-contained HTML page.
//
//   bench::BenchOptions options;
//   options.models = {"resnet50"};
//   options.precisions = {"fp32", "bf16"};
//   const bench::Report report = bench::run(options, std::cout);
//   std::cout << bench::markdown(report);
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tandem/device.h"
#include "tandem/nn.h"
#include "tandem/tensor.h"

namespace tandem::bench {

// ---------------------------------------------------------------------------------------------
// Statistics of a sample (step times, window throughputs).
// ---------------------------------------------------------------------------------------------
struct Summary {
  std::size_t count = 0;
  double median = 0.0;
  double p10 = 0.0;
  double p90 = 0.0;
  double mean = 0.0;
  double min = 0.0;
  double max = 0.0;
};
// The q-quantile (0 <= q <= 1) by linear interpolation between the closest ranks (NumPy's
// default); throws InvalidArgument for an empty sample or q outside [0, 1].
double quantile(std::vector<double> values, double q);
// Throws InvalidArgument for an empty sample.
Summary summarize(const std::vector<double>& values);
// Seconds of each of `calls` calls of `run`, after `warmup` untimed ones.
std::vector<double> time_calls(const std::function<void()>& run, int warmup, int calls);

// ---------------------------------------------------------------------------------------------
// Hardware: published peak rates and memory bandwidths, and the CPU's measured ones.
// ---------------------------------------------------------------------------------------------
enum class Precision { fp32, bf16 };
// "fp32" or "bf16"; throws InvalidArgument naming the text otherwise.
Precision parse_precision(const std::string& text);
const char* precision_name(Precision precision);

struct HardwareSpec {
  std::string key;   // "A100": matched (case-insensitively) against device names
  std::string name;  // "NVIDIA A100 SXM4 80GB"
  std::string kind;  // "gpu" or "tpu"
  // Dense peak FLOP/s (no sparsity); 0 where the hardware has no such rate. fp32 on NVIDIA GPUs
  // with tensor cores is TF32, as Tandem computes f32 matmuls and convolutions by default.
  double peak_fp32_flops = 0.0;
  double peak_bf16_flops = 0.0;
  double memory_bandwidth = 0.0;  // bytes/s
  std::string fp32_note;          // why fp32 has no rate, or "TF32 tensor cores"
  std::string source;             // where the figures are published
  // The shortest time one op takes however little work it has: on GPUs, where each op is at
  // least one kernel issued from the host, an assumed 4 us (launch plus the shortest run; not a
  // published figure). 0 for TPUs, whose XLA programs fuse a step's ops into a few.
  double min_op_seconds = 0.0;
};
const std::vector<HardwareSpec>& hardware_table();
// The entry whose key occurs in `device_name` (case-insensitive), or nullptr.
const HardwareSpec* find_hardware(std::string_view device_name);
// The peak of `spec` at `precision` (0 when it has none).
double peak_flops(const HardwareSpec& spec, Precision precision);

// The CPU's peak rates measured by a short calibration run on `threads` threads (about a
// second): the best matmul rate per precision and the best streaming bandwidth. Cached per
// thread count for the process.
struct CpuPeaks {
  int threads = 0;
  double fp32_flops = 0.0;
  double bf16_flops = 0.0;
  double memory_bandwidth = 0.0;  // bytes/s
};
const CpuPeaks& calibrate_cpu(int threads);

// ---------------------------------------------------------------------------------------------
// Workloads and their FLOPs.
// ---------------------------------------------------------------------------------------------
struct Workload {
  std::string model;    // "mlp", "cnn", "resnet50" or "transformer"
  Shape example_shape;  // one example, e.g. (224, 224, 3) or (128) token ids
  std::int64_t classes = 0;
  bool token_ids = false;  // i32 inputs below `vocabulary`
  std::int64_t vocabulary = 0;
  std::int64_t epoch_examples = 0;  // the data set an epoch stands for (time and cost per epoch)
  std::string epoch_data_set;       // its name, e.g. "ImageNet-1k train"
};
struct WorkloadOptions {
  std::int64_t image_size = 0;       // resnet50's input side (0: 224)
  std::int64_t sequence_length = 0;  // transformer's (0: 128)
  std::int64_t classes = 0;          // 0: the workload's default
};
// The workloads `tandem bench` knows.
std::vector<std::string> workload_names();
// Throws InvalidArgument naming the model and the choices.
Workload workload(const std::string& model, const WorkloadOptions& options = {});
// The workload's model, built under the current mixed-precision policy. "transformer" is the
// BERT-base encoder (12 layers, hidden 768, 12 heads, feed-forward 3072).
nn::Model build_model(const Workload& workload);
// A random batch of the workload's shape: features (batch, ...) and labels (batch) i32.
std::pair<Tensor, Tensor> synthetic_batch(const Workload& workload, std::int64_t batch,
                                          std::uint64_t seed);

// The work of the ops that ran, from the op table's cost functions, per op and phase.
struct OpWork {
  std::string op;     // "conv2d"
  std::string phase;  // "forward", "backward", "optimizer" or "other"
  std::int64_t calls = 0;
  double flops = 0.0;
  double bytes = 0.0;
  double seconds = 0.0;  // measured on the device profiled
};
struct Work {
  std::vector<OpWork> ops;
  double flops = 0.0;
  double bytes = 0.0;
  // Multiply-accumulates of the convolutions and matrix products (their FLOPs / 2): the figure
  // papers publish ("ResNet-50: 4.1 GMACs").
  double macs = 0.0;
};
Work work_of(std::vector<OpWork> ops);
// One forward pass of `model` on `inputs` (inference mode), profiled.
Work forward_work(nn::Model& model, const Tensor& inputs);

// ---------------------------------------------------------------------------------------------
// Prices and cost.
// ---------------------------------------------------------------------------------------------
struct Price {
  std::string key;      // the table's name, e.g. "h100"
  std::string match;    // matched (case-insensitively) against device names, e.g. "H100"
  double per_hour = 0;  // per device-hour; per core-hour when per_core
  bool per_core = false;
  std::string source;
  std::string date;
};
struct PriceTable {
  std::string origin;  // the file, "--price-per-hour" or "built-in defaults"
  std::string currency = "USD";
  std::vector<Price> prices;
  // A price for every device, overriding the table (--price-per-hour).
  std::optional<double> flat_per_hour;
  // The price of a device named `device_name` ("cpu" for the CPU) on `threads` cores.
  struct Quote {
    double per_hour = 0.0;
    std::string source;  // "<key>: <source> (<date>)"
  };
  std::optional<Quote> quote(std::string_view device_name, int threads) const;
};
// The TOML shipped with Tandem (`tandem bench --print-prices` writes it out to edit).
const char* default_prices_toml();
PriceTable default_prices();
// Parses a TOML price table (toml++): `currency` and [device.<key>] tables of match, per_hour
// (or per_core_hour), source and date. Errors name `origin`, the line and the fix.
PriceTable parse_prices(std::string_view text, const std::string& origin);
// Throws IoError naming the file when it cannot be read, is not a regular file (a directory,
// FIFO or device) or is larger than 1 MiB.
PriceTable load_prices(const std::string& path);

struct Cost {
  double per_1000_steps = 0.0;
  double per_million_samples = 0.0;
  double per_epoch = 0.0;
};
// What the steps cost at `price_per_hour`; an epoch is ceil(epoch_examples / batch) steps.
Cost cost_of(double price_per_hour, double step_seconds, std::int64_t batch,
             std::int64_t epoch_examples);

// ---------------------------------------------------------------------------------------------
// Results.
// ---------------------------------------------------------------------------------------------
struct Row {
  std::string kind;       // "measured", "estimate" or "peer"
  std::string framework;  // "tandem", "tensorflow", "pytorch"
  std::string framework_version;
  std::string model;
  std::string device;       // "cpu", "cuda:0", or the estimated hardware's key
  std::string device_name;  // "Intel(R) Xeon(R) ...", "NVIDIA H100 80GB HBM3", "TPU v5e"
  std::string precision;
  std::int64_t batch_size = 0;
  int threads = 0;
  std::vector<double> step_seconds;  // every timed step
  Summary step;                      // of step_seconds
  std::vector<double> window_samples_per_second;
  double samples_per_second = 0.0;    // batch / median step time (peers likewise)
  std::vector<double> epoch_seconds;  // measured epochs (epoch mode)
  std::int64_t epoch_examples = 0;
  double epoch_seconds_projected = 0.0;  // ceil(epoch_examples / batch) x median step
  std::int64_t peak_memory_bytes = 0;
  double device_utilization_percent = -1.0;  // -1: not measured
  // The whole machine's CPU use during the timed steps (all cores, every process): well above
  // this run's own share means other work competed for the CPUs. -1: not measured.
  double machine_cpu_percent = -1.0;
  // Other processes' CPU use during the timed steps, in cores (the machine's less this run's):
  // from kBusyMachineCores (tandem/runtime.h) up the row is marked as measured on a busy
  // machine. -1: not measured.
  double other_cpu_cores = -1.0;
  double input_wait_share = 0.0;
  double flops_per_step = 0.0;
  double bytes_per_step = 0.0;
  double peak_flops = 0.0;
  double memory_bandwidth = 0.0;  // bytes/s of the device (measured on the CPU)
  std::string peak_source;
  double mfu = -1.0;             // -1: no peak rate known
  double price_per_hour = -1.0;  // -1: no price known
  std::string price_source;
  Cost cost;
  // Estimates: the roofline bound, the measured/roofline ratio it was scaled by (at least 1) and
  // where that was measured.
  double roofline_step_seconds = 0.0;
  double calibration_ratio = 0.0;
  std::string calibrated_on;
  // Peers: Tandem's samples/s over theirs on the same configuration.
  double tandem_ratio = 0.0;
  // XLA rows: seconds spent tracing, lowering and compiling the step's programs, and the first
  // step's wall time (those plus its run); -1 elsewhere.
  double compile_seconds = -1.0;
  double first_step_seconds = -1.0;
  // Measured rows: how Tandem ran the step: "compiled", "eager" or "xla" (the whole step compiled
  // by the XLA plugin); "" elsewhere.
  std::string training_step;
  // Measured rows: the profiled training step's work per op (what estimates are built from).
  std::vector<OpWork> ops;
};
struct Skipped {
  std::string kind;  // "measured", "estimate" or "peer"
  std::string what;  // "resnet50 bf16 batch 64 on cuda:0"
  std::string reason;
};
struct Report {
  std::string created;  // UTC, ISO 8601
  std::string host;
  std::string cpu;
  std::string tandem_version;
  std::string command;
  std::string prices_origin;
  std::string currency = "USD";
  std::vector<Row> rows;
  std::vector<Skipped> skipped;
  // Among measured rows: the lowest cost per million samples and the highest samples/s
  // (indices into rows; -1 when none).
  int cheapest = -1;
  int fastest = -1;
};
// Recomputes cheapest and fastest.
void rank(Report& report);

std::string to_json(const Report& report);
// Throws IoError naming `origin` when `text` is not a bench report.
Report report_from_json(const std::string& text, const std::string& origin);
Report read_report(const std::string& path);
std::string to_csv(const Report& report);
std::string markdown(const Report& report);
// A self-contained page (inline SVG charts, no scripts or network): throughput and cost per
// configuration and the step-time distribution, each mark carrying its value (data-value).
std::string to_html(const Report& report);
// The change from `before` to `after`, configuration by configuration, as a Markdown table.
std::string compare(const Report& before, const Report& after);

// ---------------------------------------------------------------------------------------------
// Running a matrix.
// ---------------------------------------------------------------------------------------------
struct BenchOptions {
  std::vector<std::string> models{"mlp"};
  // "all", "cpu", "cuda", "cuda:N", and the XLA strategies' names "xla-cpu", "xla-gpu", "tpu"
  std::vector<std::string> devices{"cpu"};
  std::vector<std::string> precisions{"fp32"};
  std::vector<std::int64_t> batch_sizes{64};
  WorkloadOptions workload;
  int threads = 0;  // 0: Tandem's default
  int warmup_steps = 5;
  int steps = 20;  // per timed window
  int windows = 3;
  // Epoch mode (the smoke preset, a real data set): train `epochs` full passes over the data
  // instead of timed windows; the first warmup_steps are left out of the step statistics.
  int epochs = 0;
  std::int64_t dataset_size = 0;    // synthetic examples in epoch mode (0: 1,000)
  std::string data_dir;             // Fashion-MNIST/MNIST IDX files (mlp and cnn)
  std::int64_t epoch_examples = 0;  // 0: the workload's data set
  double learning_rate = 1e-3;
  // Tandem's training step compiled (true) or eager (false); unset: train::default_jit_compile
  // for the device. The XLA platforms always compile the whole step.
  std::optional<bool> jit_compile;
  PriceTable prices = default_prices();
  // Hardware keys to estimate ("all" or e.g. "A100", "TPU v5e"); empty: none.
  std::vector<std::string> estimates{"all"};
  std::vector<std::string> peers;  // "tf", "tf-xla" (jit_compile=True), "torch"
  std::string peer_python = ".venv/bin/python";
  std::string peer_script = "bench/peers/run_peer.py";
  int peer_timeout_seconds = 1800;
  std::string command;   // recorded in the report
  std::string cpu_name;  // the CPU's model, for the report
  // `tandem bench --inference` (src/cli/inference.cpp): inference latency and throughput on the
  // CPU instead of training steps; precisions fp32 and int8.
  bool inference = false;
};
// Runs every combination present, skips the rest with the reason, adds estimates and peers.
// Progress lines go to `log`.
Report run(const BenchOptions& options, std::ostream& log);

// The devices a --devices list names on this machine, each with why it cannot run when it
// cannot ("" when it can).
struct DeviceChoice {
  std::string spec;  // "cpu", "cuda:1", "xla-cpu"
  // Where the batches live: the device itself, or the host for an XLA platform.
  std::optional<Device> device;
  std::string name;  // what it is, e.g. "NVIDIA H100 80GB HBM3"
  std::string unavailable;
  std::string xla_platform;  // "cpu", "gpu", "tpu": trained through the Xla strategy; "" if not
};
std::vector<DeviceChoice> resolve_devices(const std::vector<std::string>& specs);
// The XLA platform a --devices name asks for ("xla-cpu" -> "cpu", "xla-gpu", "tpu"), or "".
std::string xla_platform_of(const std::string& spec);
// Why `precision` cannot run on `choice` ("" when it can).
std::string precision_unsupported(const DeviceChoice& choice, Precision precision);

// The roofline step time of `ops` on hardware with these rates: per op, the longest of its FLOPs
// at the peak, its bytes at the bandwidth and the hardware's shortest op.
double roofline_seconds(const std::vector<OpWork>& ops, double peak_flops, double bandwidth,
                        double min_op_seconds = 0.0);
// Roofline estimates of the measured rows' configurations on the hardware `keys` names ("all":
// every table entry not present), each scaled by its measured row's measured/roofline ratio
// (at least 1: no device beats its roofline).
// Combinations the hardware cannot run (no published rate) are added to skipped.
void add_estimates(Report& report, const std::vector<std::string>& keys, const PriceTable& prices);

// A peer run through run_peer.py; returns the row, or the reason it was skipped.
struct PeerOutcome {
  std::optional<Row> row;
  std::string skipped_reason;
};
PeerOutcome run_peer(const BenchOptions& options, const std::string& framework,
                     const Row& tandem_row);

}  // namespace tandem::bench
