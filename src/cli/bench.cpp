// `tandem bench`: training throughput, MFU and cost of the zoo's models on every device,
// precision and batch size asked for, with estimates for absent hardware and the TensorFlow and
// PyTorch peers; `tandem bench compare A.json B.json` shows the change between two runs.
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/format.h"
#include "tandem/bench.h"
#include "tandem/distribute.h"
#include "tandem/error.h"

namespace tandem::cli {

const CommandSpec& bench_spec() {
  static const CommandSpec spec{
      "bench",
      "Measure training speed and cost across devices, precisions and frameworks",
      "tandem bench [options]\n       tandem bench compare A.json B.json",
      "Trains each --model on synthetic data of its input shape (or --data) on every\n"
      "combination of --devices, --precision and --batch-size present here, skipping the rest\n"
      "with the reason. Each run: --warmup-steps untimed steps (one of them profiled for the\n"
      "op table's FLOPs and bytes), then --windows timed windows of --steps steps. Reports the\n"
      "median and p10/p90 step time, samples/s, time per epoch of the model's data set, peak\n"
      "memory, mean device utilisation, the input-wait share, MFU (the CPU's peak measured by\n"
      "a short calibration run, GPUs' from published figures) and the cost per 1,000 steps,\n"
      "per million samples and per epoch from a price table; names the fastest and the\n"
      "cheapest configuration; adds roofline estimates (labelled as such) for T4, V100, A100,\n"
      "H100, H200 and TPU v3/v4/v5e/v5p/v6e; and runs bench/peers/run_peer.py for --peers.\n"
      "--preset smoke: ResNet-50, 1,000 synthetic 224x224x3 images, 1,000 classes, batch 64,\n"
      "3 epochs, Adam 1e-3, on every device present, printing each epoch's time.",
      {{"--model", "LIST", "mlp, cnn, resnet50, transformer, comma-separated (default mlp)"},
       {"--preset", "NAME", "smoke: the classic accelerator smoke test (see above)"},
       {"--devices", "LIST", "all, cpu, cuda, cuda:N, comma-separated (default cpu)"},
       {"--precision", "LIST", "fp32, bf16, comma-separated (default fp32)"},
       {"--batch-size", "LIST", "batch sizes per replica, comma-separated (default 64)"},
       {"--threads", "N", "CPU threads (default: every core)"},
       {"--warmup-steps", "N", "untimed steps first (default 5)"},
       {"--steps", "N", "steps per timed window (default 20)"},
       {"--windows", "N", "timed windows (default 3)"},
       {"--epochs", "N", "train N full passes over the data instead of timed windows"},
       {"--dataset-size", "N", "synthetic examples per epoch with --epochs (default 1000)"},
       {"--data", "DIR", "Fashion-MNIST/MNIST IDX files to train mlp/cnn on (implies --epochs 1)"},
       {"--image-size", "N", "resnet50's input side (default 224)"},
       {"--sequence-length", "N", "transformer's sequence length (default 128)"},
       {"--classes", "N", "output classes (default: the workload's)"},
       {"--epoch-examples", "N",
        "examples per epoch for epoch time and cost (default: the "
        "workload's data set)"},
       {"--learning-rate", "X", "Adam's learning rate (default 0.001)"},
       {"--prices", "FILE", "price table (TOML) instead of the built-in one"},
       {"--price-per-hour", "X", "one price per device-hour for every device"},
       {"--print-prices", "", "print the built-in price table (TOML) and exit"},
       {"--estimate", "LIST",
        "hardware to estimate: all, none or keys such as A100,TPU v5e "
        "(default all)"},
       {"--peers", "LIST", "tf, torch: run bench/peers/run_peer.py on the same configurations"},
       {"--peer-python", "PATH", "Python for the peers (default .venv/bin/python)"},
       {"--peer-script", "PATH", "the peers' runner (default bench/peers/run_peer.py)"},
       {"--peer-timeout", "SECONDS", "give up on a peer run after this long (default 1800)"},
       {"--json", "FILE", "write the report as JSON"},
       {"--csv", "FILE", "write the report as CSV"},
       {"--html", "FILE", "write a self-contained HTML report with charts"}},
      /*takes_command=*/false,
      /*operands=*/"compare A.json B.json",
      /*operands_optional=*/true,
  };
  return spec;
}

namespace {

std::vector<std::string> split_list(const std::string& option, const std::string& text) {
  std::vector<std::string> items;
  std::stringstream stream(text);
  std::string item;
  while (std::getline(stream, item, ',')) {
    const auto first = item.find_first_not_of(' ');
    const auto last = item.find_last_not_of(' ');
    if (first == std::string::npos) {
      throw UsageError(option + " has an empty item in '" + text + "'; separate items by commas");
    }
    items.push_back(item.substr(first, last - first + 1));
  }
  if (items.empty()) throw UsageError(option + " needs at least one item");
  return items;
}

int as_int(const std::string& option, const std::string& text) {
  const std::int64_t value = parse_positive_integer(option, text);
  if (value > 1'000'000'000) throw UsageError(option + " is too large: " + text);
  return static_cast<int>(value);
}

bench::BenchOptions parse_options(const ParsedArgs& args) {
  bench::BenchOptions options;
  if (const auto preset = args.value("--preset")) {
    if (*preset != "smoke")
      throw UsageError("unknown --preset '" + *preset + "'; the preset is smoke");
    options.models = {"resnet50"};
    options.devices = {"all"};
    options.batch_sizes = {64};
    options.epochs = 3;
    options.dataset_size = 1000;
    options.workload.classes = 1000;
    options.warmup_steps = 2;
  }
  if (auto text = args.value("--model")) {
    options.models = split_list("--model", *text);
    for (const std::string& model : options.models) {
      try {
        bench::workload(model);
      } catch (const InvalidArgument& error) {
        throw UsageError(std::string("--model: ") + error.what());
      }
    }
  }
  if (auto text = args.value("--devices")) options.devices = split_list("--devices", *text);
  for (const std::string& device : options.devices) {
    if (device == "all") continue;
    try {
      Device::parse(device);
    } catch (const InvalidArgument&) {
      throw UsageError("--devices: unknown device '" + device + "'; use all, cpu, cuda or cuda:N");
    }
  }
  if (auto text = args.value("--precision")) options.precisions = split_list("--precision", *text);
  for (const std::string& precision : options.precisions) {
    if (precision != "fp32" && precision != "bf16")
      throw UsageError("--precision: unknown precision '" + precision + "'; use fp32 or bf16");
  }
  if (auto text = args.value("--batch-size")) {
    options.batch_sizes.clear();
    for (const std::string& item : split_list("--batch-size", *text))
      options.batch_sizes.push_back(parse_positive_integer("--batch-size", item));
  }
  if (auto text = args.value("--threads")) options.threads = as_int("--threads", *text);
  if (auto text = args.value("--warmup-steps"))
    options.warmup_steps = as_int("--warmup-steps", *text);
  if (auto text = args.value("--steps")) options.steps = as_int("--steps", *text);
  if (auto text = args.value("--windows")) options.windows = as_int("--windows", *text);
  if (auto text = args.value("--epochs")) options.epochs = as_int("--epochs", *text);
  if (auto text = args.value("--dataset-size"))
    options.dataset_size = parse_positive_integer("--dataset-size", *text);
  if (auto text = args.value("--data")) {
    options.data_dir = *text;
    if (options.epochs == 0) options.epochs = 1;
  }
  if (options.epochs > 0 && options.dataset_size == 0) options.dataset_size = 1000;
  if (auto text = args.value("--image-size"))
    options.workload.image_size = parse_positive_integer("--image-size", *text);
  if (auto text = args.value("--sequence-length"))
    options.workload.sequence_length = parse_positive_integer("--sequence-length", *text);
  if (auto text = args.value("--classes"))
    options.workload.classes = parse_positive_integer("--classes", *text);
  if (auto text = args.value("--epoch-examples"))
    options.epoch_examples = parse_positive_integer("--epoch-examples", *text);
  if (auto text = args.value("--learning-rate"))
    options.learning_rate = parse_positive_number("--learning-rate", *text);
  if (auto path = args.value("--prices")) options.prices = bench::load_prices(*path);
  if (auto text = args.value("--price-per-hour"))
    options.prices.flat_per_hour = parse_positive_number("--price-per-hour", *text);
  if (auto text = args.value("--estimate")) {
    options.estimates = split_list("--estimate", *text);
    if (options.estimates == std::vector<std::string>{"none"}) options.estimates.clear();
  }
  if (auto text = args.value("--peers")) {
    for (const std::string& peer : split_list("--peers", *text)) {
      if (peer != "tf" && peer != "torch")
        throw UsageError("--peers: unknown peer '" + peer + "'; use tf, torch or tf,torch");
      options.peers.push_back(peer);
    }
  }
  if (auto path = args.value("--peer-python")) options.peer_python = *path;
  if (auto path = args.value("--peer-script")) options.peer_script = *path;
  if (auto text = args.value("--peer-timeout"))
    options.peer_timeout_seconds = as_int("--peer-timeout", *text);
  return options;
}

// The smoke preset's classic output: each device's epochs and total.
void print_epochs(const bench::Report& report) {
  for (const bench::Row& row : report.rows) {
    if (row.kind != "measured" || row.epoch_seconds.empty()) continue;
    double total = 0.0;
    std::cout << row.model << " " << row.precision << " batch " << row.batch_size << " on "
              << row.device << (row.device_name.empty() ? "" : " (" + row.device_name + ")") << ":";
    for (std::size_t epoch = 0; epoch < row.epoch_seconds.size(); ++epoch) {
      total += row.epoch_seconds[epoch];
      std::cout << (epoch ? ", " : " ") << "epoch " << epoch + 1 << " "
                << fixed(row.epoch_seconds[epoch], 2) << " s";
    }
    std::cout << "; total " << fixed(total, 2) << " s\n";
  }
}

int run_compare(const ParsedArgs& args) {
  const std::vector<std::string>& operands = args.operands();
  if (operands.size() != 3) {
    throw UsageError(
        "'tandem bench compare' takes two reports: tandem bench compare A.json B.json");
  }
  const bench::Report before = bench::read_report(operands[1]);
  const bench::Report after = bench::read_report(operands[2]);
  std::cout << bench::compare(before, after);
  return 0;
}

}  // namespace

int run_bench(const ParsedArgs& args) {
  if (!args.operands().empty()) {
    if (args.operands().front() != "compare") {
      throw UsageError("'tandem bench' takes no argument '" + args.operands().front() +
                       "'; did you mean 'tandem bench compare A.json B.json'?");
    }
    return run_compare(args);
  }
  if (args.has("--print-prices")) {
    std::cout << bench::default_prices_toml();
    return 0;
  }
  bench::BenchOptions options = parse_options(args);
  options.cpu_name = distribute::probe_cpu().model;
  std::string command = "tandem bench";
  for (const char* option :
       {"--preset", "--model", "--devices", "--precision", "--batch-size", "--threads",
        "--warmup-steps", "--steps", "--windows", "--epochs", "--dataset-size", "--data",
        "--image-size", "--sequence-length", "--classes", "--peers"}) {
    if (auto value = args.value(option)) command += std::string(" ") + option + " " + *value;
  }
  options.command = command;
  const bench::Report report = bench::run(options, std::cerr);
  print_epochs(report);
  std::cout << bench::markdown(report);
  if (auto path = args.value("--json")) bench::write_text_file(*path, bench::to_json(report));
  if (auto path = args.value("--csv")) bench::write_text_file(*path, bench::to_csv(report));
  if (auto path = args.value("--html")) bench::write_text_file(*path, bench::to_html(report));
  return 0;
}

}  // namespace tandem::cli
