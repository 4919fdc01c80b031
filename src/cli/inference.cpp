#include "cli/inference.h"

#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/text.h"
#include "tandem/data.h"
#include "tandem/quantization.h"
#include "tandem/runtime.h"

namespace tandem::cli {

namespace {

// One model at one precision, measured.
struct InferenceRow {
  std::string model;
  std::string precision;
  std::size_t bytes = 0;
  double p50_ms = 0.0;  // batch-1 latency percentiles
  double p90_ms = 0.0;
  double p99_ms = 0.0;
  struct Throughput {
    std::int64_t batch = 0;
    double median = 0.0;  // images/s over the windows
    double min = 0.0;
    double max = 0.0;
  };
  std::vector<Throughput> throughput;
};

InferenceRow measure(const bench::BenchOptions& options, const std::string& model_name,
                     const std::string& precision) {
  const bench::Workload workload = bench::workload(model_name, options.workload);
  nn::clear_session();
  manual_seed(1);
  nn::Model model = bench::build_model(workload);
  if (precision == "int8") {
    const auto [examples, labels] = bench::synthetic_batch(workload, 64, 7);
    data::TensorDataset calibration(examples, labels);
    calibration.batch(16);
    quantization::quantize_model(model, calibration);
  }
  InferenceModel inference(model);
  InferenceRow row{model_name, precision, inference_model_bytes(model)};
  const int calls = options.steps * options.windows;
  const Tensor one = bench::synthetic_batch(workload, 1, 3).first;
  std::vector<double> latency;
  for (const double seconds :
       bench::time_calls([&] { (void)inference.predict(one, 1).to_vector<float>(); },
                         options.warmup_steps, calls))
    latency.push_back(1e3 * seconds);
  row.p50_ms = bench::quantile(latency, 0.50);
  row.p90_ms = bench::quantile(latency, 0.90);
  row.p99_ms = bench::quantile(latency, 0.99);
  for (const std::int64_t batch : options.batch_sizes) {
    const Tensor inputs = bench::synthetic_batch(workload, batch, 5).first;
    const auto run = [&] { (void)inference.predict(inputs, batch).to_vector<float>(); };
    (void)bench::time_calls(run, options.warmup_steps, 0);
    std::vector<double> rates;
    for (int window = 0; window < options.windows; ++window) {
      double seconds = 0.0;
      for (const double call : bench::time_calls(run, 0, options.steps))
        seconds += call;
      rates.push_back(static_cast<double>(batch * options.steps) / seconds);
    }
    row.throughput.push_back({batch, bench::quantile(rates, 0.5),
                              *std::min_element(rates.begin(), rates.end()),
                              *std::max_element(rates.begin(), rates.end())});
  }
  return row;
}

nlohmann::json to_json(const std::vector<InferenceRow>& rows, const bench::BenchOptions& options) {
  nlohmann::json report{{"kind", "inference"},
                        {"threads", num_threads()},
                        {"cpu", options.cpu_name},
                        {"command", options.command},
                        {"rows", nlohmann::json::array()}};
  for (const InferenceRow& row : rows) {
    nlohmann::json throughput = nlohmann::json::array();
    for (const InferenceRow::Throughput& t : row.throughput) {
      throughput.push_back(
          {{"batch", t.batch}, {"median", t.median}, {"min", t.min}, {"max", t.max}});
    }
    report["rows"].push_back(
        {{"model", row.model},
         {"precision", row.precision},
         {"model_bytes", row.bytes},
         {"latency_ms", {{"p50", row.p50_ms}, {"p90", row.p90_ms}, {"p99", row.p99_ms}}},
         {"images_per_sec", throughput}});
  }
  return report;
}

}  // namespace

int run_inference_bench(const bench::BenchOptions& options, const std::string& json_path) {
  if (options.threads > 0) set_num_threads(options.threads);
  // A compiled graph per batch size is expected; its log lines are not the user's business.
  set_compile_log([](const std::string&) {});
  std::vector<InferenceRow> rows;
  for (const std::string& model : options.models) {
    for (const std::string& precision : options.precisions) {
      std::cerr << "inference: " << model << " " << precision << "\n";
      rows.push_back(measure(options, model, precision));
    }
  }
  std::cout << "Inference on the CPU, " << num_threads() << " threads: batch-1 latency over "
            << options.windows * options.steps << " calls, throughput of " << options.windows
            << " windows of " << options.steps << " calls (median, min-max)\n\n"
            << "| model | precision | size | batch 1 p50 ms | p90 ms | p99 ms |";
  for (const std::int64_t batch : options.batch_sizes)
    std::cout << " batch " << batch << " images/s |";
  std::cout << "\n|---|---|---:|---:|---:|---:|";
  for (std::size_t i = 0; i < options.batch_sizes.size(); ++i)
    std::cout << "---:|";
  std::cout << "\n";
  for (const InferenceRow& row : rows) {
    std::cout << "| " << row.model << " | " << row.precision << " | "
              << format_memory_size(row.bytes) << " | " << fixed(row.p50_ms, 2) << " | "
              << fixed(row.p90_ms, 2) << " | " << fixed(row.p99_ms, 2) << " |";
    for (const InferenceRow::Throughput& t : row.throughput)
      std::cout << " " << fixed(t.median, 1) << " (" << fixed(t.min, 1) << "-" << fixed(t.max, 1)
                << ") |";
    std::cout << "\n";
  }
  // int8 against f32 of the same model, where both ran.
  for (const InferenceRow& int8 : rows) {
    if (int8.precision != "int8") continue;
    for (const InferenceRow& f32 : rows) {
      if (f32.model != int8.model || f32.precision != "fp32") continue;
      std::cout << int8.model << ": int8 / fp32 batch-1 latency "
                << fixed(f32.p50_ms / int8.p50_ms, 2) << "x faster";
      for (std::size_t i = 0; i < int8.throughput.size(); ++i)
        std::cout << ", batch " << int8.throughput[i].batch << " throughput "
                  << fixed(int8.throughput[i].median / f32.throughput[i].median, 2) << "x";
      std::cout << "\n";
    }
  }
  if (!json_path.empty()) write_file_atomically(json_path, to_json(rows, options).dump(2) + "\n");
  return 0;
}

}  // namespace tandem::cli
