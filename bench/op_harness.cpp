// The op harness from the command line (like ggml's test-backend-ops): runs the cases of
// tests/ops/harness/op_cases.cpp in one mode, with the same code as the tests.
//
//   build/bench/op_harness perf [--op NAME] [--case NAME] [--dtype f32|bf16|f16|all]
//                               [--device cpu|cuda] [--repeats N] [--size small|medium|large]
//                               [--threads N] [--seed N]
//   build/bench/op_harness grad|backends [same options]
//
// perf prints a Markdown table: op, case, device, dtype, time per call (median of --repeats
// samples after a warm-up) and the spread, GFLOP/s and GB/s of the op table's cost model over
// every op a call runs, and the inputs' shapes. grad and backends print their failures, skips
// and (backends) the error of every comparison; the exit status is 1 when a case failed.
#include <cstdlib>
#include <iostream>
#include <string>

#include "ops/harness/op_harness.h"
#include "tandem/cuda.h"
#include "tandem/runtime.h"

namespace {

using namespace tandem;

int usage(const std::string& problem) {
  std::string modes;
  for (const harness::ModeDef& def : harness::modes())
    modes += std::string("  ") + def.name + ": " + def.summary + "\n";
  std::cerr << (problem.empty() ? "" : "op_harness: " + problem + "\n")
            << "usage: op_harness MODE [--op NAME] [--case NAME] [--dtype f32|bf16|f16|all]\n"
               "                       [--device cpu|cuda] [--repeats N] [--size S] "
               "[--threads N] [--seed N]\nmodes:\n"
            << modes;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage("");
  try {
    const harness::Mode mode = harness::parse_mode(argv[1]);
    harness::Options options;
    std::string dtype = mode == harness::Mode::perf ? "f32" : "all";
    std::string seed = mode == harness::Mode::perf ? "1" : "";  // perf: the same inputs each run
    for (int i = 2; i < argc; ++i) {
      const std::string flag = argv[i];
      if (i + 1 >= argc) return usage(flag + " needs a value");
      const std::string value = argv[++i];
      if (flag == "--op") {
        options.op = value;
      } else if (flag == "--case") {
        options.case_name = value;
      } else if (flag == "--dtype") {
        dtype = value;
      } else if (flag == "--device") {
        options.device = Device::parse(value).type;
      } else if (flag == "--repeats") {
        options.repeats = std::stoi(value);
      } else if (flag == "--size") {
        options.size = harness::parse_size(value);
      } else if (flag == "--threads") {
        set_num_threads(std::stoi(value));
      } else if (flag == "--seed") {
        seed = value;
      } else {
        return usage("unknown option " + flag);
      }
    }
    if (dtype != "all") options.dtypes = {parse_dtype(dtype)};
    if (options.device) {
      bool usable = false;
      for (Device device : harness::harness_devices())
        usable = usable || device.type == *options.device;
      if (!usable) return usage("no usable device of that type here: " + cuda::status().reason);
    }
    if (!seed.empty()) setenv("TANDEM_TEST_SEED", seed.c_str(), 1);
    const harness::Report report = harness::run_mode(mode, options);
    if (report.cases == 0)
      return usage("no case matches --op '" + options.op + "' --case '" + options.case_name + "'");
    harness::print_report(mode, report, std::cout);
    return report.failures.empty() ? 0 : 1;
  } catch (const std::exception& error) {
    return usage(error.what());
  }
}
