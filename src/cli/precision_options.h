#pragma once
// `tandem train`'s options for numbers and memory: --precision (fp32, bf16, fp16: Keras' dtype
// policies float32, mixed_bfloat16, mixed_float16), --memory-limit (a cap on what Tandem
// allocates on the training devices), --find-max-batch (the largest batch that fits) and
// --keep-denormals (IEEE gradual underflow in CPU kernels instead of flushing to zero).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "tandem/device.h"

namespace tandem::cli {

struct PrecisionOptions {
  std::string precision = "fp32";  // fp32, bf16, fp16
  std::size_t memory_limit = 0;    // bytes; 0: none
  bool find_max_batch = false;
  bool keep_denormals = false;  // tandem::set_flush_denormals(false)
};

// The options: their help lines and parsing.
const OptionTable<PrecisionOptions>& precision_options();

// "float32", "mixed_bfloat16", "mixed_float16": the dtype policy --precision names.
std::string policy_name(const std::string& precision);

// The one-line warning for a precision that is slow on these training devices (fp16 on the CPU:
// oneDNN has no float16 kernels, so every op runs Tandem's scalar reference loops); nullopt when
// there is nothing to warn about.
std::optional<std::string> precision_warning(const std::string& precision,
                                             const std::vector<Device>& devices);

// "512M", "2G", "1.5GiB", "300000000": bytes (K, M, G, T are powers of 1024). Throws UsageError
// naming the option.
std::size_t parse_memory_size(const std::string& option, const std::string& text);

}  // namespace tandem::cli
