#pragma once
// `tandem train`'s options for numbers and memory: --precision (fp32, bf16, fp16: Keras' dtype
// policies float32, mixed_bfloat16, mixed_float16), --memory-limit (a cap on what Tandem
// allocates on the training devices) and --find-max-batch (the largest batch that fits).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
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

// The largest batch size in [1, most] for which `fits` returns true, starting from `first`:
// doubling while it fits, halving while it does not, then bisecting between the last size that
// fitted and the first that did not. `fits` trains a step or two at the size and returns false
// when it runs out of memory. Throws Error when not even one example fits.
std::int64_t find_max_batch(std::int64_t first, std::int64_t most,
                            const std::function<bool(std::int64_t)>& fits, std::ostream* log);

}  // namespace tandem::cli
