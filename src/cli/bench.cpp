// `tandem bench`: training throughput, MFU and cost of the zoo's models on every device,
// precision and batch size asked for, with estimates for absent hardware and the TensorFlow and
// PyTorch peers; `tandem bench compare A.json B.json` shows the change between two runs.
#include <algorithm>
#include <iostream>

#include "cli/commands.h"
#include "cli/inference.h"
#include "core/files.h"
#include "core/text.h"
#include "tandem/bench.h"
#include "tandem/distribute.h"
#include "tandem/error.h"
#include "tandem/run.h"

namespace tandem::cli {

namespace {

// How `tandem bench` names a setting in messages: its option.
std::string option_name(const std::string& key) {
  return "--" + key;
}

int as_int(const std::string& option, const std::string& text) {
  const std::int64_t value = parse_positive_integer(option, text);
  if (value > 1'000'000'000) throw UsageError(option + " is too large: " + text);
  return static_cast<int>(value);
}

// What `tandem bench` runs, and where it writes the report.
struct BenchCommand {
  bench::BenchOptions run;
  struct Output {
    bool print_prices = false;
    std::string json;
    std::string csv;
    std::string html;
  } output;
};

const OptionTable<bench::BenchOptions>& run_options() {
  using O = bench::BenchOptions;
  static const OptionTable<O> table(
      {
          // First: the options after it change the preset's settings.
          {"--preset", "NAME", "smoke: the classic accelerator smoke test (see above)",
           [](O& options, const std::string& option, const std::string& text) {
             if (text != "smoke") {
               throw UsageError("unknown " + option + " '" + text + "'; the preset is smoke");
             }
             options.models = {"resnet50"};
             options.devices = {"all"};
             options.batch_sizes = {64};
             options.epochs = 3;
             options.dataset_size = 1000;
             options.workload.classes = 1000;
             options.warmup_steps = 2;
           }},
          {"--model", "LIST", "mlp, cnn, resnet50, transformer, comma-separated (default mlp)",
           [](O& options, const std::string& option, const std::string& text) {
             options.models = parse_list(option, text);
             for (const std::string& model : options.models) {
               try {
                 bench::workload(model);
               } catch (const InvalidArgument& error) {
                 throw UsageError(option + ": " + error.what());
               }
             }
           }},
          {"--devices", "LIST",
           "all, cpu, cuda, cuda:N, xla-cpu, xla-gpu, tpu (the whole step compiled by XLA), "
           "comma-separated (default cpu)",
           [](O& options, const std::string& option, const std::string& text) {
             options.devices = parse_list(option, text);
             for (const std::string& device : options.devices) {
               if (device == "all" || !bench::xla_platform_of(device).empty()) continue;
               try {
                 Device::parse(device);
               } catch (const InvalidArgument&) {
                 throw UsageError(option + ": unknown device '" + device +
                                  "'; use all, cpu, cuda, cuda:N, xla-cpu, xla-gpu or tpu");
               }
             }
           }},
          {"--precision", "LIST",
           "fp32, bf16 (training) or fp32, int8 (--inference), comma-separated (default fp32)",
           [](O& options, const std::string& option, const std::string& text) {
             options.precisions = parse_list(option, text);
           }},
          {"--batch-size", "LIST", "batch sizes per replica, comma-separated (default 64)",
           [](O& options, const std::string& option, const std::string& text) {
             options.batch_sizes.clear();
             for (const std::string& item : parse_list(option, text))
               options.batch_sizes.push_back(parse_positive_integer(option, item));
           }},
          {"--threads", "N",
           "CPU threads (default: automatic, the usable cores less those other processes are "
           "using)",
           into(&O::threads, as_int)},
          {"--inference", "",
           "measure inference instead: batch-1 latency percentiles, throughput at each "
           "--batch-size and model size, f32 with batch norms folded or int8 (--precision int8: "
           "post-training quantisation calibrated on 64 synthetic examples, oneDNN's int8 "
           "kernels), "
           "compiled, on the CPU, with the model's initial weights; --steps calls per window",
           flag(&O::inference)},
          {"--warmup-steps", "N", "untimed steps first (default 5)",
           into(&O::warmup_steps, as_int)},
          {"--steps", "N", "steps per timed window (default 20)", into(&O::steps, as_int)},
          {"--windows", "N", "timed windows (default 3)", into(&O::windows, as_int)},
          {"--epochs", "N", "train N full passes over the data instead of timed windows",
           into(&O::epochs, as_int)},
          {"--dataset-size", "N", "synthetic examples per epoch with --epochs (default 1000)",
           into(&O::dataset_size, parse_positive_integer)},
          {"--data", "DIR",
           "Fashion-MNIST/MNIST IDX files to train mlp/cnn on (implies --epochs 1)",
           into(&O::data_dir)},
          {"--image-size", "N", "resnet50's input side (default 224)",
           [](O& options, const std::string& option, const std::string& text) {
             options.workload.image_size = parse_positive_integer(option, text);
           }},
          {"--sequence-length", "N", "transformer's sequence length (default 128)",
           [](O& options, const std::string& option, const std::string& text) {
             options.workload.sequence_length = parse_positive_integer(option, text);
           }},
          {"--classes", "N", "output classes (default: the workload's)",
           [](O& options, const std::string& option, const std::string& text) {
             options.workload.classes = parse_positive_integer(option, text);
           }},
          {"--epoch-examples", "N",
           "examples per epoch for epoch time and cost (default: the workload's data set)",
           into(&O::epoch_examples, parse_positive_integer)},
          {"--learning-rate", "X", "Adam's learning rate (default 0.001)",
           into(&O::learning_rate, parse_positive_number)},
          {"--jit", "on|off",
           "Tandem's step compiled or eager, as tandem train --jit (default: on for the CPU, off "
           "on GPUs)",
           [](O& options, const std::string& option, const std::string& text) {
             options.jit_compile = one_of({"on", "off"}, "jit")(option, text) == "on";
           }},
          // Before --price-per-hour, which overrides the table's prices.
          {"--prices", "FILE", "price table (TOML) instead of the built-in one",
           [](O& options, const std::string&, const std::string& text) {
             options.prices = bench::load_prices(text);
           }},
          {"--price-per-hour", "X", "one price per device-hour for every device",
           [](O& options, const std::string& option, const std::string& text) {
             options.prices.flat_per_hour = parse_positive_number(option, text);
           }},
          {"--estimate", "LIST",
           "hardware to estimate: all, none or keys such as A100,TPU v5e (default all)",
           [](O& options, const std::string& option, const std::string& text) {
             options.estimates = parse_list(option, text);
             if (options.estimates == std::vector<std::string>{"none"}) options.estimates.clear();
           }},
          {"--peers", "LIST",
           "tf, tf-xla (jit_compile=True), torch: run bench/peers/run_peer.py on the same "
           "configurations",
           [](O& options, const std::string& option, const std::string& text) {
             for (const std::string& peer : parse_list(option, text)) {
               if (peer != "tf" && peer != "tf-xla" && peer != "torch") {
                 throw UsageError(option + ": unknown peer '" + peer +
                                  "'; use tf, tf-xla, torch or a list of them");
               }
               options.peers.push_back(peer);
             }
           }},
          {"--peer-python", "PATH", "Python for the peers (default .venv/bin/python)",
           into(&O::peer_python)},
          {"--peer-script", "PATH", "the peers' runner (default bench/peers/run_peer.py)",
           into(&O::peer_script)},
          {"--peer-timeout", "SECONDS", "give up on a peer run after this long (default 1800)",
           into(&O::peer_timeout_seconds, as_int)},
      },
      {[](O& options, const ParsedArgs& args) {
        const std::vector<std::string> precisions = options.inference
                                                        ? std::vector<std::string>{"fp32", "int8"}
                                                        : std::vector<std::string>{"fp32", "bf16"};
        for (const std::string& precision : options.precisions) {
          if (std::find(precisions.begin(), precisions.end(), precision) == precisions.end()) {
            throw UsageError(
                "--precision: unknown precision '" + precision + "'; use " + precisions[0] +
                " or " + precisions[1] +
                (options.inference ? " with --inference" : " (int8 with --inference)"));
          }
        }
        if (options.inference) {
          for (const char* option :
               {"--preset", "--devices", "--epochs", "--dataset-size", "--data", "--peers",
                "--estimate", "--prices", "--price-per-hour", "--learning-rate", "--epoch-examples",
                "--jit"}) {
            if (args.has(option)) {
              throw UsageError(std::string(option) +
                               " is for training runs; --inference measures inference on the CPU "
                               "(drop one of them)");
            }
          }
        }
        if (args.has("--data") && options.epochs == 0) options.epochs = 1;
        if (options.epochs > 0 && options.dataset_size == 0) options.dataset_size = 1000;
      }});
  return table;
}

const OptionTable<BenchCommand>& bench_options() {
  using O = BenchCommand::Output;
  static const OptionTable<BenchCommand> table = [] {
    const OptionTable<O> output({
        {"--print-prices", "", "print the built-in price table (TOML) and exit",
         flag(&O::print_prices)},
        {"--json", "FILE", "write the report as JSON", into(&O::json, parse_output_path)},
        {"--csv", "FILE", "write the report as CSV", into(&O::csv, parse_output_path)},
        {"--html", "FILE", "write a self-contained HTML report with charts",
         into(&O::html, parse_output_path)},
    });
    OptionTable<BenchCommand> options({});
    options.add(run_options(), &BenchCommand::run).add(output, &BenchCommand::output);
    return options;
  }();
  return table;
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
      bench_options().specs(),
      /*takes_command=*/false,
      /*operands=*/"compare A.json B.json",
      /*operands_optional=*/true,
  };
  return spec;
}

int run_bench(const ParsedArgs& args) {
  if (!args.operands().empty()) {
    if (args.operands().front() != "compare") {
      throw UsageError("'tandem bench' takes no argument '" + args.operands().front() +
                       "'; did you mean 'tandem bench compare A.json B.json'?");
    }
    return run_compare(args);
  }
  BenchCommand command = bench_options().read(args);
  if (command.output.print_prices) {
    std::cout << bench::default_prices_toml();
    return 0;
  }
  bench::BenchOptions& options = command.run;
  options.cpu_name = distribute::probe_cpu().model;
  std::string line = "tandem bench";
  for (const char* option :
       {"--preset", "--model", "--devices", "--precision", "--batch-size", "--threads",
        "--warmup-steps", "--steps", "--windows", "--epochs", "--dataset-size", "--data",
        "--image-size", "--sequence-length", "--classes", "--peers"}) {
    if (auto value = args.value(option)) line += std::string(" ") + option + " " + *value;
  }
  options.command = line;
  const BenchCommand::Output& output = command.output;
  // Checked before the runs: a report never waits on a destination found bad at the end.
  for (const auto& [option, path] :
       {std::pair{"--json", &output.json}, std::pair{"--csv", &output.csv},
        std::pair{"--html", &output.html}}) {
    if (!path->empty()) require_writable_destination(*path, option, Destination::file);
  }
  if (const auto warning = distribute::thread_count_warning(options.threads, option_name)) {
    std::cerr << "warning: " << *warning << "\n";
  }
  // What train warns about a precision on the CPU (bf16 without AVX-512 runs on the loops), said
  // once before the runs whose figures it explains.
  const bool on_cpu =
      std::any_of(options.devices.begin(), options.devices.end(),
                  [](const std::string& device) { return device == "all" || device == "cpu"; });
  for (const std::string& precision : options.precisions) {
    if (!on_cpu || options.inference) break;
    if (const auto warning = run::precision_warning(precision, {Device::cpu()}, option_name)) {
      std::cerr << "warning: " << *warning << "\n";
    }
  }
  if (options.inference) {
    if (!output.csv.empty() || !output.html.empty()) {
      throw UsageError("--inference writes its report with --json (no --csv or --html)");
    }
    return run_inference_bench(options, output.json);
  }
  const bench::Report report = bench::run(options, std::cerr);
  print_epochs(report);
  std::cout << bench::markdown(report);
  if (!output.json.empty()) write_file_atomically(output.json, bench::to_json(report));
  if (!output.csv.empty()) write_file_atomically(output.csv, bench::to_csv(report));
  if (!output.html.empty()) write_file_atomically(output.html, bench::to_html(report));
  const bool measured = std::any_of(report.rows.begin(), report.rows.end(), [](const auto& row) {
    return row.kind == "measured" || row.kind == "peer";
  });
  if (!measured) {
    throw Error(
        "nothing was measured: every configuration asked for was skipped (the reasons are "
        "listed above); ask for devices this machine has (tandem devices lists them)");
  }
  return 0;
}

}  // namespace tandem::cli
