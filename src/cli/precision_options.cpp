#include "cli/precision_options.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "tandem/error.h"
#include "tandem/runtime.h"

namespace tandem::cli {

const OptionTable<PrecisionOptions>& precision_options() {
  using O = PrecisionOptions;
  static const OptionTable<O> table({
      {"--precision", "P",
       "fp32, bf16 (mixed_bfloat16: compute in bfloat16, variables float32) or fp16 "
       "(mixed_float16, with dynamic loss scaling) (default fp32)",
       into(&O::precision, one_of({"fp32", "bf16", "fp16"}, "precision"))},
      {"--memory-limit", "SIZE",
       "cap what Tandem allocates on each training device, e.g. 512M or 8G (default: none); an "
       "allocation past it fails as on a full device",
       into(&O::memory_limit, parse_memory_size)},
      {"--find-max-batch", "",
       "first search the largest batch size that fits the device's memory (from --batch-size "
       "up), then train with it",
       flag(&O::find_max_batch)},
      {"--keep-denormals", "",
       "CPU kernels keep denormal floats (IEEE gradual underflow, as PyTorch does) instead of "
       "flushing them to zero (as TensorFlow and XLA do; on x86 each operation on one costs "
       "about a hundred cycles)",
       flag(&O::keep_denormals)},
  });
  return table;
}

std::string policy_name(const std::string& precision) {
  if (precision == "bf16") return "mixed_bfloat16";
  if (precision == "fp16") return "mixed_float16";
  return "float32";
}

std::optional<std::string> precision_warning(const std::string& precision,
                                             const std::vector<Device>& devices) {
  const bool on_cpu = std::any_of(devices.begin(), devices.end(), [](const Device& device) {
    return device.type == DeviceType::cpu;
  });
  if (!on_cpu) return std::nullopt;
  if (precision == "fp16") {
    return std::string(
               "--precision fp16 on the CPU runs Tandem's float16 reference loops, over "
               "100x slower than bf16 there (no oneDNN float16 kernels); ") +
           (cpu_kernels().bf16 ? "use --precision bf16 on the CPU"
                               : "use --precision fp32 on this CPU (it has no AVX-512 for bf16)");
  }
  if (precision == "bf16" && !cpu_kernels().bf16) {
    return "--precision bf16 on this CPU runs Tandem's bfloat16 loops, many times slower than "
           "fp32 (oneDNN has bf16 kernels only with AVX-512, which this CPU lacks: " +
           cpu_backend_description() + "); use --precision fp32 here";
  }
  return std::nullopt;
}

std::size_t parse_memory_size(const std::string& option, const std::string& text) {
  std::size_t consumed = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &consumed);
  } catch (const std::exception&) {
    consumed = 0;
  }
  std::string unit = text.substr(consumed);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && (unit[1] == 'i' || unit[1] == 'I')) unit.pop_back();
  double scale = 1.0;
  if (unit.size() == 1) {
    const std::string units = "KMGT";
    const std::size_t power = units.find(static_cast<char>(std::toupper(unit[0])));
    if (power == std::string::npos) consumed = 0;
    scale = std::pow(1024.0, static_cast<double>(power + 1));
  } else if (!unit.empty()) {
    consumed = 0;
  }
  const double bytes = value * scale;
  if (consumed == 0 || !(bytes >= 1.0) || !std::isfinite(bytes)) {
    throw UsageError(option + " needs a memory size such as 512M, 8G or 1073741824, got '" + text +
                     "'");
  }
  return static_cast<std::size_t>(bytes);
}

}  // namespace tandem::cli
