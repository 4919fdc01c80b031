#include "ops/harness/op_harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>

#include "ops/backend.h"
#include "ops/harness/finite_difference.h"
#include "tandem/compile.h"
#include "tandem/cuda.h"
#include "tandem/xla.h"

namespace tandem::harness {

std::vector<Device> harness_devices() {
  std::vector<Device> devices;
  for (const Backend* backend : available_backends())
    devices.push_back(Device{backend->device_type(), 0});
  return devices;
}

std::string Precision::str() const {
  return std::string(dtype_name(dtype)) + (tf32 ? "+tf32" : "");
}

// Measured on the CPU (bf16 mostly through oneDNN, f16 through the loops) over 300 seeds of
// the backends mode: outputs, rounded a few times, stay within 7.1e-3 in bf16 and 7.1e-4 in f16
// (3.6 and 1.5 times the unit roundoff; max-pool backward, whose overlapping windows add rounded
// gradients, and layer-norm backward the largest); gradients, whose rules reuse the rounded
// forward outputs and take a rounded output gradient, reach 2.0e-2 in bf16 and 2.3e-3 in f16
// (div's broadcast divisor, rsqrt, pow). bf16's 3e-2 on gradients is the one loose figure; the
// div cases keep their divisor in [1, 2] so that it is not looser still (with divisors near 0.3
// the broadcast gradient's sum cancels to 8e-2).
Tolerance tolerance_for(const Precision& precision) {
  switch (precision.dtype) {
    case DType::f32:
      // IEEE products agree to rounding; TF32 keeps 10 bits of the mantissa.
      return precision.tf32 ? Tolerance{1e-2, 1e-2} : Tolerance{1e-5, 1e-5};
    case DType::bf16:
      return {1e-2, 3e-2};
    case DType::f16:
      return {2e-3, 5e-3};
    default:
      return {0, 0};
  }
}

namespace {

// The f32 output tolerance on a device other than the CPU reference, except for the reductions
// over a whole medium case (57k to 92k elements), which XLA and CUDA sum in another order than
// the CPU kernels: their rounding grows with the count and with cancellation in the sum (2.4e-5
// seen op by op on XLA:CPU; 1.1e-4 for a sum over 7x159x83, TANDEM_TEST_SEED=4220355196). A
// reduction that drops or repeats elements is off by far more than 30x the f32 tolerance.
// TANDEM_XLA_HARNESS_TOLERANCE replaces it for XLA (scripts/tpu-check.sh: TPUs multiply f32 in
// bf16 passes).
double f32_output_tolerance(OpKind op, DeviceType device) {
  if (const char* given = std::getenv("TANDEM_XLA_HARNESS_TOLERANCE");
      given != nullptr && device == DeviceType::xla) {
    return std::stod(given);
  }
  const double f32 = tolerance_for({DType::f32}).outputs;
  return op == OpKind::sum || op == OpKind::mean ? 30 * f32 : f32;
}

std::string shapes_of(const Inputs& inputs) {
  std::string text;
  for (const Tensor& input : inputs) {
    if (!text.empty()) text += " ";
    std::string shape;
    for (std::int64_t extent : input.shape())
      shape += (shape.empty() ? "" : "x") + std::to_string(extent);
    text += shape.empty() ? "scalar" : shape;
  }
  return text;
}

std::uint64_t run_seed(const Options& options) {
  return options.seed ? *options.seed : testing::test_seed();
}

std::string seed_note(const Options& options) {
  return " (TANDEM_TEST_SEED=" + std::to_string(run_seed(options)) + ")";
}

bool wants(const Options& options, DType dtype) {
  return options.dtypes.empty() ||
         std::find(options.dtypes.begin(), options.dtypes.end(), dtype) != options.dtypes.end();
}

bool wants(const Options& options, Device device) {
  return !options.device || *options.device == device.type;
}

// Attaches an observer to every op run while it lives.
class ObserverScope {
 public:
  explicit ObserverScope(OpObserver& observer) : observer_(observer) {
    add_op_observer(&observer_);
  }
  ~ObserverScope() { remove_op_observer(&observer_); }
  ObserverScope(const ObserverScope&) = delete;
  ObserverScope& operator=(const ObserverScope&) = delete;

 private:
  OpObserver& observer_;
};

// Records the dtype of the first input (the one dispatch picks the kernel by) of every call of
// one op.
class KernelDtypes final : public OpObserver {
 public:
  explicit KernelDtypes(OpKind op) : op_(op) {}
  void after_op(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor>,
                const Attrs&) override {
    if (kind == op_ && !inputs.empty()) dtypes.push_back(inputs[0].dtype());
  }
  std::vector<DType> dtypes;

 private:
  OpKind op_;
};

// Why `device` cannot run the case's op with its floating inputs in `dtype`, or "" when it can:
// the dtypes its kernels would be picked by are seen on one run on the CPU in f32 (floating
// ones become `dtype`; a select's bool condition stays bool).
std::string missing_kernel(const OpCase& c, const Instance& instance, Device device, DType dtype) {
  Inputs inputs;
  for (const Tensor& input : instance.inputs)
    inputs.push_back(is_floating(input.dtype()) ? cast(input, DType::f32) : input);
  KernelDtypes seen(c.op);
  {
    const ObserverScope scope(seen);
    instance.run(inputs);
  }
  for (DType kernel : seen.dtypes) {
    if (is_floating(kernel)) kernel = dtype;
    if (!backend_for(device).supports(c.op, kernel)) {
      return c.label() + " on " + device.str() + " in " + dtype_name(dtype) + ": no " +
             op_name(c.op) + " kernel for " + dtype_name(kernel) + " inputs";
    }
  }
  return "";
}

// ---- grad ----

bool grad_applies(const OpCase& c) {
  return c.grad && op_def(c.op).gradient != nullptr;
}

void run_grad(const OpCase& c, const Options& options, Report& report) {
  InputMaker maker(DType::f64, options.size.value_or(Size::small));
  const Instance instance = c.make(maker);
  const std::string mismatch = testing::gradient_mismatch(
      instance.run, instance.inputs, {c.grad_step, c.grad_tolerance, c.differentiable});
  if (!mismatch.empty()) {
    report.failures.push_back(c.label() + " grad on inputs " + shapes_of(instance.inputs) + ": " +
                              mismatch + seed_note(options));
  }
}

// ---- backends ----

bool always(const OpCase&) {
  return true;
}

struct Evaluation {
  Outputs outputs;                // on the host, floating ones in f32
  std::vector<Tensor> gradients;  // of the floating inputs, on the host in f32
};

// Runs an instance on `device` with its floating inputs rounded to `dtype`; the reference runs
// them on the CPU in f32 after that rounding, so both start from the same values.
Evaluation evaluate(const Instance& instance, bool gradients, Device device, DType dtype,
                    bool reference) {
  Inputs inputs;
  for (const Tensor& input : instance.inputs) {
    Tensor value = input;
    if (is_floating(input.dtype())) {
      value = cast(input, dtype);
      if (reference) value = cast(value, DType::f32);
    }
    inputs.push_back(value.to(device));
  }
  Evaluation result;
  GradientTape tape;
  std::vector<Tensor> floating;
  for (const Tensor& input : inputs) {
    if (is_floating(input.dtype())) {
      tape.watch(input);
      floating.push_back(input);
    }
  }
  const Outputs outputs = instance.run(inputs);
  if (gradients && !floating.empty()) {
    // A fixed pseudo-random weighting of each floating output, the same on every device.
    std::vector<Tensor> weights;
    for (std::size_t o = 0; o < outputs.size(); ++o) {
      if (!is_floating(outputs[o].dtype())) {
        weights.emplace_back();
        continue;
      }
      std::vector<float> values(static_cast<std::size_t>(outputs[o].numel()));
      for (std::size_t i = 0; i < values.size(); ++i)
        values[i] = uniform_from_bits(philox_word(7, o, i)) - 0.5f;
      weights.push_back(Tensor::from_vector(values, outputs[o].shape(), device));
    }
    const Tensor loss = testing::weighted_sum(outputs, weights);
    for (const Tensor& gradient : tape.gradient(loss, floating, {}, /*unconnected_zero=*/true)) {
      result.gradients.push_back(cast(gradient, DType::f32).to(Device::cpu()));
    }
  }
  for (const Tensor& output : outputs) {
    const Tensor host = output.to(Device::cpu());
    result.outputs.push_back(is_floating(host.dtype()) ? cast(host, DType::f32) : host);
  }
  return result;
}

// max |actual - expected| / max(1, max |scale|); infinite for a shape or dtype mismatch and NaN
// where either side has one.
double scaled_error(const Tensor& actual, const Tensor& expected, const Tensor& scale) {
  if (actual.shape() != expected.shape() || actual.dtype() != expected.dtype()) return INFINITY;
  const std::vector<double> a = actual.to_vector<double>();
  const std::vector<double> b = expected.to_vector<double>();
  double largest = 1.0;
  for (const double value : scale.to_vector<double>())
    largest = std::max(largest, std::abs(value));
  double error = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double difference = std::abs(a[i] - b[i]);
    if (std::isnan(difference)) return NAN;
    error = std::max(error, difference);
  }
  return error / largest;
}

// max |actual - expected| / max(1, max |expected|).
double tensor_error(const Tensor& actual, const Tensor& expected) {
  return scaled_error(actual, expected, expected);
}

double largest_error(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected) {
  if (actual.size() != expected.size()) return INFINITY;
  double error = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double e = tensor_error(actual[i], expected[i]);
    if (!(e <= error)) error = e;  // keeps NaN
  }
  return error;
}

// The precisions `device` is compared in for `dtype`: none for the CPU in f32 (the reference),
// f32 with TF32 off and, for cases that use it, on for a GPU.
std::vector<Precision> precisions(Device device, DType dtype, bool uses_tf32) {
  if (dtype != DType::f32) return {{dtype, false}};
  if (device.type == DeviceType::cpu) return {};
  if (device.type == DeviceType::cuda && uses_tf32) return {{dtype, false}, {dtype, true}};
  return {{dtype, false}};
}

// Sets TF32 for the GPU's f32 matmuls and convolutions while it lives, then restores it.
class Tf32Scope {
 public:
  explicit Tf32Scope(bool enabled) : previous_(cuda::tf32_enabled()) {
    cuda::set_tf32_enabled(enabled);
  }
  ~Tf32Scope() { cuda::set_tf32_enabled(previous_); }

 private:
  bool previous_;
};

// `inputs` with the f32 ones rounded to TF32's 10-bit mantissa (to nearest, ties to even): what
// the GPU's TF32 products read of them. Compared in TF32 on inputs it represents exactly, the GPU
// differs from the f32 reference by its arithmetic only: otherwise the input rounding alone moves
// sums near 0 across a fused relu and flips its gradient's mask.
Inputs rounded_to_tf32(Inputs inputs) {
  for (Tensor& input : inputs) {
    if (input.dtype() != DType::f32) continue;
    std::vector<float> values = input.to(Device::cpu()).to_vector<float>();
    for (float& value : values) {
      if (!std::isfinite(value)) continue;
      std::uint32_t bits = 0;
      std::memcpy(&bits, &value, sizeof(bits));
      constexpr std::uint32_t dropped = 13;  // 23 - 10 mantissa bits
      bits += ((1u << (dropped - 1)) - 1) + ((bits >> dropped) & 1u);
      bits &= ~((1u << dropped) - 1);
      std::memcpy(&value, &bits, sizeof(bits));
    }
    input = Tensor::from_vector(values, input.shape(), input.device());
  }
  return inputs;
}

void run_backends(const OpCase& c, const Options& options, Report& report) {
  InputMaker maker(DType::f32, options.size.value_or(Size::medium));
  const Instance made = c.make(maker);
  std::optional<Instance> made_tf32;  // rounded once, where a TF32 comparison runs
  for (Device device : harness_devices()) {
    if (!wants(options, device)) continue;
    for (DType dtype : c.dtypes) {
      if (!wants(options, dtype)) continue;
      for (const Precision& precision : precisions(device, dtype, c.uses_tf32)) {
        const std::string where = device.str() + " in " + precision.str();
        if (std::string missing = missing_kernel(c, made, device, dtype); !missing.empty()) {
          report.skips.push_back(std::move(missing));
          continue;
        }
        Comparison comparison{c.label(), device.str(), precision};
        comparison.tolerance = tolerance_for(precision);
        if (precision.dtype == DType::f32 && !precision.tf32) {
          comparison.tolerance.outputs = f32_output_tolerance(c.op, device.type);
        }
        const Tf32Scope tf32(precision.tf32);
        if (precision.tf32 && !made_tf32)
          made_tf32 = Instance{rounded_to_tf32(made.inputs), made.run};
        const Instance& instance = precision.tf32 ? *made_tf32 : made;
        const Evaluation expected =
            evaluate(instance, c.compare_gradients, Device::cpu(), dtype, true);
        const Evaluation actual = evaluate(instance, c.compare_gradients, device, dtype, false);
        comparison.output_error = largest_error(actual.outputs, expected.outputs);
        comparison.gradient_error = largest_error(actual.gradients, expected.gradients);
        comparison.passed = comparison.output_error <= comparison.tolerance.outputs &&
                            comparison.gradient_error <= comparison.tolerance.gradients;
        if (!comparison.passed) {
          std::ostringstream message;
          message << c.label() << " on " << where << " vs the cpu in f32, inputs "
                  << shapes_of(instance.inputs) << ": output error " << comparison.output_error
                  << " (tolerance " << comparison.tolerance.outputs << "), gradient error "
                  << comparison.gradient_error << " (tolerance " << comparison.tolerance.gradients
                  << ")" << seed_note(options);
          report.failures.push_back(message.str());
        }
        report.comparisons.push_back(comparison);
      }
    }
  }
}

// ---- traced ----

// The case as a compiled step (trace_step: traced once, passes, memory plan, one run) against
// the same call run eagerly, on the CPU in f32, bit for bit: a graph runs the eager kernels on
// the same values. A case whose op writes its inputs (the optimizer updates) clones them first,
// and cloning reads values, so it is traced with its inputs captured, as a training step
// captures weights and slots, instead of as the step's arguments.
void run_traced(const OpCase& c, const Options& options, Report& report) {
  InputMaker maker(DType::f32, options.size.value_or(Size::medium));
  const Instance instance = c.make(maker);
  const Outputs expected = instance.run(instance.inputs);
  const bool captured = op_def(c.op).writes_aliased_inputs;
  const Inputs arguments = captured ? Inputs{} : instance.inputs;
  CompiledStep step = trace_step(
      c.label(),
      [&](const std::vector<Tensor>& symbolic) {
        return instance.run(captured ? instance.inputs : symbolic);
      },
      arguments);
  const Outputs actual = step.run(arguments);
  std::string mismatch;
  if (actual.size() != expected.size()) {
    mismatch =
        std::to_string(actual.size()) + " outputs, eagerly " + std::to_string(expected.size());
  }
  for (std::size_t i = 0; mismatch.empty() && i < actual.size(); ++i) {
    const Tensor a = actual[i].to(Device::cpu());
    const Tensor e = expected[i].to(Device::cpu());
    if (a.shape() != e.shape() || a.dtype() != e.dtype() ||
        std::memcmp(a.raw_data(), e.raw_data(), a.nbytes()) != 0) {
      mismatch = "output " + std::to_string(i) + " differs from the eager call's";
    }
  }
  if (!mismatch.empty()) {
    report.failures.push_back(c.label() + " traced: " + mismatch + ", inputs " +
                              shapes_of(instance.inputs) + seed_note(options) + "\n" +
                              step.listing());
  }
}

// ---- xla ----

// The case as a one-op compiled step lowered to StableHLO (each op's lowering rule) and run by
// XLA:CPU, the PJRT plugin scripts/fetch-pjrt.sh fetches, against the eager CPU call in f32.
// XLA's math routines (exp, tanh, erf, ...) are not the CPU backend's, so the outputs agree to
// the f32 tolerance, not bit for bit.
bool xla_applies(const OpCase& c) {
  return op_def(c.op).lower != nullptr;
}

// Why the xla mode cannot run here, or "".
std::string xla_unavailable() {
  if (!xla::build_info().built) return xla::build_info().reason;
  if (xla::fetched_cpu_plugin().empty() && std::getenv("TANDEM_XLA_HARNESS_PLUGIN") == nullptr) {
    return "no XLA:CPU plugin: run scripts/fetch-pjrt.sh (it needs the package index)";
  }
  return "";
}

// XLA:CPU, or the plugin TANDEM_XLA_HARNESS_PLUGIN names (scripts/tpu-check.sh gives libtpu).
const xla::Client& xla_cpu_client() {
  static const xla::Client client([] {
    const char* plugin = std::getenv("TANDEM_XLA_HARNESS_PLUGIN");
    return plugin != nullptr ? std::string(plugin) : xla::fetched_cpu_plugin();
  }());
  return client;
}

// `instance` on `inputs` as a one-op step lowered to StableHLO and run by XLA:CPU; the module
// too, for a failure's message.
struct XlaRun {
  std::vector<Tensor> outputs;
  std::string module;
};

XlaRun run_on_xla(const OpCase& c, const Instance& instance, const Inputs& inputs) {
  // As in the traced mode, a case that writes its inputs is traced with them captured.
  const bool captured_inputs = op_def(c.op).writes_aliased_inputs;
  const Inputs step_inputs = captured_inputs ? Inputs{} : inputs;
  CompiledStep step = trace_step(
      c.label(),
      [&](const std::vector<Tensor>& symbolic) {
        return instance.run(captured_inputs ? inputs : symbolic);
      },
      step_inputs);
  CompiledStep::Stablehlo program = step.lower_to_stablehlo();
  const xla::Client& client = xla_cpu_client();
  const xla::Executable executable = client.compile(program.module);
  std::vector<xla::Buffer> arguments;
  const std::vector<Tensor>& captured = program.captured;
  const std::vector<Tensor>& host_operands = step.fill_host_operands();
  for (const std::vector<Tensor>* tensors : {&step_inputs, &captured, &host_operands}) {
    for (const Tensor& tensor : *tensors)
      arguments.push_back(client.to_device(tensor.to(Device::cpu())));
  }
  std::vector<const xla::Buffer*> pointers;
  for (const xla::Buffer& argument : arguments)
    pointers.push_back(&argument);
  XlaRun run{{}, std::move(program.module)};
  // The step's results; the updated arguments after them are its in-place writes.
  std::vector<xla::Buffer> results = executable.execute(pointers);
  results.erase(results.end() - static_cast<std::ptrdiff_t>(program.updated.size()), results.end());
  for (const xla::Buffer& result : results)
    run.outputs.push_back(result.to_host());
  return run;
}

// A sum's (or mean's) rounding in another order grows with the magnitudes of its terms, not with
// its value, which their signs can cancel down: XLA:CPU's sum/all of 6x132x82 values differed
// from the CPU kernel's by 4.9e-4 of the sum (TANDEM_TEST_SEED=3346047908; 3 runs in 300 above
// 1e-4). Its error is measured against the same reduction of |x| instead.
Tensor summed_magnitudes(const Instance& instance, const Inputs& inputs) {
  Inputs magnitudes;
  for (const Tensor& input : inputs)
    magnitudes.push_back(is_floating(input.dtype()) ? abs(input) : input);
  return instance.run(magnitudes)[0];
}

// In f32 against the eager call; in bf16 (where the case runs in it) against the eager f32
// call on the same bf16-rounded inputs, as the backends mode compares a GPU, within bf16's
// tolerance; a sum against the sum of magnitudes (summed_magnitudes).
void run_xla(const OpCase& c, const Options& options, Report& report) {
  if (const std::string why = xla_unavailable(); !why.empty()) {
    report.skips.push_back(c.label() + " on XLA:CPU: " + why);
    return;
  }
  InputMaker maker(DType::f32, options.size.value_or(Size::medium));
  const Instance instance = c.make(maker);
  for (const DType dtype : {DType::f32, DType::bf16}) {
    if (std::find(c.dtypes.begin(), c.dtypes.end(), dtype) == c.dtypes.end()) continue;
    if (!wants(options, dtype)) continue;
    Inputs inputs;
    Inputs reference_inputs;
    for (const Tensor& input : instance.inputs) {
      inputs.push_back(is_floating(input.dtype()) ? cast(input, dtype) : input);
      reference_inputs.push_back(is_floating(input.dtype()) ? cast(inputs.back(), DType::f32)
                                                            : input);
    }
    const Outputs expected = instance.run(reference_inputs);
    const XlaRun run = run_on_xla(c, instance, inputs);
    std::string mismatch;
    if (run.outputs.size() != expected.size()) {
      mismatch = std::to_string(run.outputs.size()) + " outputs, eagerly " +
                 std::to_string(expected.size());
    }
    std::vector<Tensor> actual;
    for (std::size_t i = 0; mismatch.empty() && i < run.outputs.size(); ++i) {
      const Tensor& output = run.outputs[i];
      const DType wanted = is_floating(expected[i].dtype()) && is_floating(output.dtype())
                               ? output.dtype()
                               : expected[i].dtype();
      if (output.shape() != expected[i].shape() || output.dtype() != wanted) {
        mismatch = "output " + std::to_string(i) + " is " + shape_str(output.shape()) + " " +
                   dtype_name(output.dtype()) + ", eagerly " + shape_str(expected[i].shape()) +
                   " " + dtype_name(expected[i].dtype());
      }
      actual.push_back(is_floating(output.dtype()) ? cast(output, expected[i].dtype()) : output);
    }
    const double tolerance = dtype == DType::f32 ? f32_output_tolerance(c.op, DeviceType::xla)
                                                 : tolerance_for({dtype}).outputs;
    double error = 0.0;
    if (mismatch.empty()) {
      error =
          c.op == OpKind::sum || c.op == OpKind::mean
              ? scaled_error(actual[0], expected[0], summed_magnitudes(instance, reference_inputs))
              : largest_error(actual, expected);
    }
    if (mismatch.empty() && !(error <= tolerance)) {  // NaN fails too
      mismatch = "error " + std::to_string(error) + " above " + std::to_string(tolerance);
    }
    if (!mismatch.empty()) {
      report.failures.push_back(c.label() + " xla in " + dtype_name(dtype) + ": " + mismatch +
                                ", inputs " + shapes_of(instance.inputs) + seed_note(options) +
                                "\n" + run.module);
    }
  }
}

// ---- perf ----

class CostCounter final : public OpObserver {
 public:
  void after_op(OpKind kind, std::span<const Tensor> inputs, std::span<const Tensor> outputs,
                const Attrs& attrs) override {
    const std::vector<TensorMeta> in = metas_of(inputs);
    const std::vector<TensorMeta> out = metas_of(outputs);
    const OpCost cost = op_cost(kind, in, out, attrs);
    total.flops += cost.flops;
    total.bytes += cost.bytes;
    ++ops;
  }
  OpCost total;
  int ops = 0;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void run_perf(const OpCase& c, const Options& options, Report& report) {
  InputMaker maker(DType::f32, options.size.value_or(Size::large));
  const Instance instance = c.make(maker);
  for (Device device : harness_devices()) {
    if (!wants(options, device)) continue;
    Backend& backend = backend_for(device);
    for (DType dtype : c.dtypes) {
      if (!wants(options, dtype)) continue;
      if (std::string missing = missing_kernel(c, instance, device, dtype); !missing.empty()) {
        report.skips.push_back(std::move(missing));
        continue;
      }
      Inputs inputs;
      for (const Tensor& input : instance.inputs)
        inputs.push_back((is_floating(input.dtype()) ? cast(input, dtype) : input).to(device));
      Timing timing{op_name(c.op), c.name, device.str(), dtype, shapes_of(inputs)};
      auto call = [&] {
        instance.run(inputs);
        backend.synchronize();
      };
      call();  // warm-up: primitive creation, first-touch allocation
      auto start = std::chrono::steady_clock::now();
      call();
      const double once = seconds_since(start);
      // Samples of at least a millisecond, so the clock's resolution does not matter.
      timing.calls_per_sample =
          static_cast<int>(std::clamp(1e-3 / std::max(once, 1e-9), 1.0, 1000.0));
      std::vector<double> samples;
      for (int r = 0; r < std::max(1, options.repeats); ++r) {
        start = std::chrono::steady_clock::now();
        for (int i = 0; i < timing.calls_per_sample; ++i)
          instance.run(inputs);
        backend.synchronize();
        samples.push_back(seconds_since(start) / timing.calls_per_sample);
      }
      std::sort(samples.begin(), samples.end());
      timing.median_s = samples[samples.size() / 2];
      timing.min_s = samples.front();
      timing.max_s = samples.back();
      timing.cost = cost_of_call(instance.run, inputs, &timing.ops);
      report.timings.push_back(timing);
    }
  }
}

std::uint64_t label_hash(const std::string& text) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace

const std::vector<ModeDef>& modes() {
  static const std::vector<ModeDef> table{
      {Mode::grad, "grad", "gradients against central finite differences in float64", Size::small,
       grad_applies, run_grad},
      {Mode::backends, "backends",
       "every backend against the CPU f32 reference in f32, bf16 and f16", Size::medium, always,
       run_backends},
      {Mode::perf, "perf", "time per call, GFLOP/s and GB/s of the op table's cost model",
       Size::large, always, run_perf},
      {Mode::traced, "traced", "the case as a one-op compiled step against eager, bit for bit",
       Size::medium, always, run_traced},
      {Mode::xla, "xla", "the case lowered to StableHLO and run by XLA:CPU against eager",
       Size::medium, xla_applies, run_xla},
  };
  return table;
}

const ModeDef& mode_def(Mode mode) {
  for (const ModeDef& def : modes()) {
    if (def.mode == mode) return def;
  }
  throw Error("op harness: mode #" + std::to_string(static_cast<int>(mode)) + " has no entry");
}

Mode parse_mode(const std::string& name) {
  std::string names;
  for (const ModeDef& def : modes()) {
    if (name == def.name) return def.mode;
    names += (names.empty() ? "" : ", ") + std::string(def.name);
  }
  throw InvalidArgument("unknown op harness mode '" + name + "' (" + names + ")");
}

void run_case(Mode mode, const OpCase& c, const Options& options, Report& report) {
  const ModeDef& def = mode_def(mode);
  if (!def.applies(c)) return;
  testing::test_rng().seed(run_seed(options) ^ label_hash(std::string(def.name) + c.label()));
  ++report.cases;
  try {
    def.run(c, options, report);
  } catch (const std::exception& error) {
    report.failures.push_back(c.label() + " " + def.name + ": threw " + error.what() +
                              seed_note(options));
  }
}

Report run_mode(Mode mode, const Options& options) {
  Report report;
  for (const OpCase& c : op_cases()) {
    if (!options.op.empty() && options.op != op_name(c.op)) continue;
    if (!options.case_name.empty() && options.case_name != c.name) continue;
    run_case(mode, c, options, report);
  }
  return report;
}

Report run_mode_over_seeds(Mode mode, Options options, std::uint64_t first, int count) {
  Report merged;
  std::map<std::string, std::size_t> compared;  // label, device and precision -> comparison
  const auto keep_larger = [](double& kept, double error) {
    if (!(error <= kept)) kept = error;  // keeps NaN
  };
  for (int i = 0; i < count; ++i) {
    options.seed = first + static_cast<std::uint64_t>(i);
    Report run = run_mode(mode, options);
    merged.cases += run.cases;
    merged.failures.insert(merged.failures.end(), run.failures.begin(), run.failures.end());
    if (i == 0) merged.skips = std::move(run.skips);
    for (const Comparison& c : run.comparisons) {
      const auto [at, added] = compared.emplace(c.label + " " + c.device + " " + c.precision.str(),
                                                merged.comparisons.size());
      if (added) {
        merged.comparisons.push_back(c);
        continue;
      }
      Comparison& worst = merged.comparisons[at->second];
      keep_larger(worst.output_error, c.output_error);
      keep_larger(worst.gradient_error, c.gradient_error);
      worst.passed = worst.passed && c.passed;
    }
  }
  return merged;
}

namespace {

// The ops of the table that `needs_case` selects and no case `covers`.
template <typename NeedsCase, typename Covers>
std::vector<OpKind> uncovered_ops(const std::vector<OpCase>& cases, NeedsCase needs_case,
                                  Covers covers) {
  std::vector<OpKind> missing;
  for (int i = 0; i < kNumOps; ++i) {
    const auto kind = static_cast<OpKind>(i);
    if (!needs_case(kind)) continue;
    if (std::none_of(cases.begin(), cases.end(),
                     [&](const OpCase& c) { return c.op == kind && covers(c); }))
      missing.push_back(kind);
  }
  return missing;
}

}  // namespace

std::vector<OpKind> ops_without_cases(const std::vector<OpCase>& cases) {
  return uncovered_ops(
      cases, [](OpKind) { return true; }, always);
}

std::vector<OpKind> differentiable_ops_without_grad_cases(const std::vector<OpCase>& cases) {
  return uncovered_ops(
      cases, [](OpKind kind) { return op_is_defined(kind) && op_def(kind).gradient != nullptr; },
      grad_applies);
}

std::vector<OpKind> ops_in_mode(Mode mode) {
  const ModeDef& def = mode_def(mode);
  std::vector<OpKind> ops;
  for (const OpCase& c : op_cases()) {
    if (def.applies(c) && (ops.empty() || ops.back() != c.op)) ops.push_back(c.op);
  }
  return ops;
}

std::vector<const OpCase*> cases_of(OpKind op) {
  std::vector<const OpCase*> cases;
  for (const OpCase& c : op_cases()) {
    if (c.op == op) cases.push_back(&c);
  }
  return cases;
}

OpCost cost_of_call(const Run& run, const Inputs& inputs, int* ops) {
  CostCounter counter;
  {
    const ObserverScope scope(counter);
    run(inputs);
  }
  if (ops != nullptr) *ops = counter.ops;
  return counter.total;
}

namespace {

std::string formatted(const char* format, double value) {
  char text[32];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

std::string format_time(double seconds) {
  if (seconds >= 1e-1) return formatted("%.0f ms", seconds * 1e3);
  if (seconds >= 1e-3) return formatted("%.2f ms", seconds * 1e3);
  return formatted("%.1f us", seconds * 1e6);
}

std::string format_rate(double per_second) {
  return formatted(per_second >= 100 ? "%.0f" : "%.1f", per_second);
}

std::string format_error(double error) {
  return formatted("%.2g", error);
}

void print_table(const std::vector<std::vector<std::string>>& rows, std::ostream& out) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i)
      widths[i] = std::max(widths[i], row[i].size());
  }
  for (std::size_t r = 0; r < rows.size(); ++r) {
    out << "|";
    for (std::size_t i = 0; i < rows[r].size(); ++i)
      out << " " << std::left << std::setw(static_cast<int>(widths[i])) << rows[r][i] << " |";
    out << "\n";
    if (r == 0) {
      out << "|";
      for (std::size_t width : widths)
        out << std::string(width + 2, '-') << "|";
      out << "\n";
    }
  }
}

}  // namespace

void print_report(Mode mode, const Report& report, std::ostream& out) {
  if (mode == Mode::backends && !report.comparisons.empty()) {
    std::vector<std::vector<std::string>> rows{
        {"case", "device", "precision", "output error", "gradient error", "tolerance", ""}};
    std::map<std::string, std::pair<double, double>> worst;  // per device and precision
    for (const Comparison& c : report.comparisons) {
      rows.push_back(
          {c.label, c.device, c.precision.str(), format_error(c.output_error),
           format_error(c.gradient_error),
           format_error(c.tolerance.outputs) + " / " + format_error(c.tolerance.gradients),
           c.passed ? "ok" : "FAIL"});
      auto& [outputs, gradients] = worst[c.device + " " + c.precision.str()];
      outputs = std::max(outputs, c.output_error);
      gradients = std::max(gradients, c.gradient_error);
    }
    print_table(rows, out);
    out << "\nlargest errors:";
    for (const auto& [where, errors] : worst)
      out << "  " << where << " outputs " << format_error(errors.first) << ", gradients "
          << format_error(errors.second) << ";";
    out << "\n";
  }
  if (mode == Mode::perf && !report.timings.empty()) {
    std::vector<std::vector<std::string>> rows{{"op", "case", "device", "dtype", "time/call",
                                                "spread", "GFLOP/s", "GB/s", "ops", "inputs"}};
    for (const Timing& t : report.timings) {
      rows.push_back({t.op, t.name, t.device, dtype_name(t.dtype), format_time(t.median_s),
                      format_time(t.min_s) + " - " + format_time(t.max_s),
                      format_rate(t.cost.flops / t.median_s / 1e9),
                      format_rate(t.cost.bytes / t.median_s / 1e9), std::to_string(t.ops),
                      t.inputs});
    }
    print_table(rows, out);
  }
  for (const std::string& skip : report.skips)
    out << "skipped: " << skip << "\n";
  for (const std::string& failure : report.failures)
    out << "FAILED: " << failure << "\n";
  out << mode_def(mode).name << ": " << report.cases << " cases, " << report.failures.size()
      << " failures, " << report.skips.size() << " skipped (device, dtype) pairs\n";
}

}  // namespace tandem::harness
