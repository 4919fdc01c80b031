#pragma once
// The op harness (like ggml's test-backend-ops): every case of op_cases() can run in every mode.
//   grad      every case of an op with a gradient rule: the tape's gradients against central
//             finite differences in float64, on small random inputs.
//   backends  every backend harness_devices() lists against the CPU reference in f32 from the
//             same (rounded) inputs: the CPU itself in bf16 and f16, a GPU in f32 (TF32 off, and
//             on for matmul/convolution), bf16 and f16; outputs and the tape's gradients, with
//             the tolerances of tolerance_for(). Dtypes a backend has no kernel for are skipped
//             and reported as skips.
//   perf      time per call (warm-up, then the median and spread of repeated samples), with the
//             op table's FLOPs and bytes of every op a call runs: GFLOP/s and GB/s. A benchmark
//             (bench/op_harness), not a test.
// The tests (tests/ops/op_harness_test.cpp, tests/backend/op_harness_backends_test.cpp) and
//   traced    every case as a one-op compiled step (tandem/compile.h) against the eager call, bit
//             for bit (tests/compile/traced_harness_test.cpp).
//   xla       every case of an op with a StableHLO lowering rule, as a one-op compiled step
//             lowered to StableHLO and run by XLA:CPU through PJRT, against the eager CPU call
//             within the f32 tolerance (tests/compile/xla_harness_test.cpp).
// bench/op_harness run the same functions below. A mode is one entry of modes(): a new one adds
// its Mode, its entry and its run function, and covers every case.
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "ops/harness/op_cases.h"
#include "ops/op_table.h"

namespace tandem::harness {

enum class Mode { grad, backends, perf, traced, xla };

struct Options;
struct Report;

struct ModeDef {
  Mode mode;
  const char* name;
  const char* summary;
  Size size;                         // the inputs' size unless Options::size says otherwise
  bool (*applies)(const OpCase& c);  // whether the mode runs this case
  void (*run)(const OpCase& c, const Options& options, Report& report);
};

// Every mode, in the order above.
const std::vector<ModeDef>& modes();
const ModeDef& mode_def(Mode mode);
// Throws InvalidArgument naming the modes for an unknown name.
Mode parse_mode(const std::string& name);

// The devices whose backends the harness runs: device 0 of every backend in the registry that
// comes up here (available_backends), the CPU, which is also the reference, first.
std::vector<Device> harness_devices();

// A precision the backends mode compares with the CPU f32 reference: a dtype, and for f32 on a
// GPU whether TF32 products are on.
struct Precision {
  DType dtype = DType::f32;
  bool tf32 = false;
  std::string str() const;  // "bf16", "f32+tf32"
};

// The largest error allowed per tensor, max |actual - reference| / max(1, max |reference|).
struct Tolerance {
  double outputs = 0;
  double gradients = 0;
};
// Per precision, in one place.
Tolerance tolerance_for(const Precision& precision);

struct Options {
  std::string op;                    // only this op's cases ("": every op)
  std::string case_name;             // only cases of this name ("": all)
  std::vector<DType> dtypes;         // backends, perf: only these dtypes (empty: the case's)
  std::optional<DeviceType> device;  // backends, perf: only this device's backend
  std::optional<Size> size;          // in place of the mode's size
  int repeats = 10;                  // perf: timed samples per case
  // The run's seed, in place of TANDEM_TEST_SEED's (testing::test_seed): a program that runs a
  // mode over many seeds sets one per run.
  std::optional<std::uint64_t> seed;
};

// One comparison of the backends mode.
struct Comparison {
  std::string label;  // op/case
  std::string device;
  Precision precision;
  double output_error = 0;
  double gradient_error = 0;  // 0 where gradients are not compared
  Tolerance tolerance;
  bool passed = false;
};

// One row of the perf table.
struct Timing {
  std::string op, name;  // the case's op and name
  std::string device;
  DType dtype = DType::f32;
  std::string inputs;  // the inputs' shapes
  int calls_per_sample = 1;
  double median_s = 0, min_s = 0, max_s = 0;  // per call
  OpCost cost;                                // per call, of every op the call runs
  int ops = 0;                                // ops per call
};

struct Report {
  int cases = 0;                        // cases run
  std::vector<std::string> failures;    // each names the case, the mode and the seed
  std::vector<std::string> skips;       // "op/case on cuda:0 in f16: no kernel"
  std::vector<Comparison> comparisons;  // backends
  std::vector<Timing> timings;          // perf
};

// Runs `c` in `mode` (when the mode applies to it), on inputs drawn from the run's seed
// (Options::seed) mixed with the case's label, so a case draws the same inputs whichever cases
// ran before it. An exception is reported as a failure, not thrown.
void run_case(Mode mode, const OpCase& c, const Options& options, Report& report);
// Runs every case of op_cases() that `options` selects and `mode` applies to.
Report run_mode(Mode mode, const Options& options);
// run_mode once per seed, from `first` on (Options::seed), into one report: every run's failures
// (each names its seed), the first run's skips, the cases of all runs, and per comparison the
// largest errors of any run, failed where any run failed. For the kernel faults that only some
// inputs meet (bench/op_harness --seeds); not for perf.
Report run_mode_over_seeds(Mode mode, Options options, std::uint64_t first, int count);

// The ops of the table that `cases` lacks a case for.
std::vector<OpKind> ops_without_cases(const std::vector<OpCase>& cases);
// The ops with a gradient rule that `cases` lacks a case of the grad mode for.
std::vector<OpKind> differentiable_ops_without_grad_cases(const std::vector<OpCase>& cases);
// The ops `mode` runs at least one case of, in the table's order.
std::vector<OpKind> ops_in_mode(Mode mode);
std::vector<const OpCase*> cases_of(OpKind op);

// The op table's cost summed over every op that one call of `run` runs (an OpObserver).
OpCost cost_of_call(const Run& run, const Inputs& inputs, int* ops = nullptr);

// The report as text: failures, skips, and the mode's table (backends: the comparisons and the
// largest error per precision; perf: op, case, device, dtype, time per call, GFLOP/s, GB/s).
void print_report(Mode mode, const Report& report, std::ostream& out);

}  // namespace tandem::harness
