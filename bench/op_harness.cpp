// The op harness from the command line (like ggml's test-backend-ops): runs the cases of
// tests/ops/harness/op_cases.cpp in one mode, with the same code as the tests.
//
//   build/bench/op_harness perf [--op NAME] [--case NAME] [--dtype f32|bf16|f16|all]
//                               [--device cpu|cuda] [--repeats N] [--size small|medium|large]
//                               [--threads N] [--seed N]
//   build/bench/op_harness grad|backends|traced|xla [same options] [--seeds N]
//
// perf prints a Markdown table: op, case, device, dtype, time per call (median of --repeats
// samples after a warm-up) and the spread, GFLOP/s and GB/s of the op table's cost model over
// every op a call runs, and the inputs' shapes. The other modes print their failures, skips
// and (backends) the error of every comparison; the exit status is 1 when a case failed.
// --seeds N runs the mode on N seeds, --seed (1 without it) and the next N - 1, and prints every
// failure with its seed and (backends) each comparison's largest errors over them: a kernel's
// fault that only some inputs meet, which a CI machine of another CPU kind meets only by chance.
// oneDNN's ONEDNN_MAX_CPU_ISA (avx2, avx512_core, avx512_core_bf16, ...) caps the instruction
// set it dispatches to, so one machine runs the sweep on each ISA it offers, e.g.
//   ONEDNN_MAX_CPU_ISA=AVX512_CORE build/bench/op_harness backends --dtype bf16 --device cpu \
//       --seeds 200
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
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
               "[--threads N] [--seed N]\n                       [--seeds N]\nmodes:\n"
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
    std::optional<std::uint64_t> seed;
    if (mode == harness::Mode::perf) seed = 1;  // the same inputs each run
    std::optional<int> seeds;
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
        seed = std::stoull(value);
      } else if (flag == "--seeds") {
        seeds = std::stoi(value);
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
    if (seeds && (mode == harness::Mode::perf || *seeds < 1))
      return usage("--seeds takes a count of at least 1, in any mode but perf");
    if (seeds && !seed) seed = 1;
    // The (first) run's seed, which testing::test_seed() reads and prints.
    if (seed) setenv("TANDEM_TEST_SEED", std::to_string(*seed).c_str(), 1);
    const auto start = std::chrono::steady_clock::now();
    const harness::Report report = seeds
                                       ? harness::run_mode_over_seeds(mode, options, *seed, *seeds)
                                       : harness::run_mode(mode, options);
    if (report.cases == 0)
      return usage("no case matches --op '" + options.op + "' --case '" + options.case_name + "'");
    harness::print_report(mode, report, std::cout);
    if (seeds) {
      std::cout << "seeds " << *seed << " to " << *seed + *seeds - 1 << " on "
                << cpu_backend_description() << ", "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()
                << " s\n";
    }
    return report.failures.empty() ? 0 : 1;
  } catch (const std::exception& error) {
    return usage(error.what());
  }
}
