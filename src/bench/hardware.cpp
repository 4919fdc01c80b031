// Peak rates: the published figures of accelerators (with their sources) and the CPU's, measured.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <mutex>

#include "core/text.h"
#include "tandem/bench.h"
#include "tandem/error.h"
#include "tandem/ops.h"
#include "tandem/random.h"
#include "tandem/runtime.h"

namespace tandem::bench {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The best rate of `run` (which does `work` units per call) over up to `repeats` timed calls
// within `budget_seconds`, after one untimed call (oneDNN builds its primitive on the first).
// The best, not the median: the peak is what the hardware can do when nothing else runs. CPU
// ops finish before they return.
template <typename Fn>
double best_rate(Fn run, double work, int repeats, double budget_seconds) {
  run();
  double best = 0.0;
  const double deadline = now_seconds() + budget_seconds;
  for (int i = 0; i < repeats && (i < 3 || now_seconds() < deadline); ++i) {
    const double start = now_seconds();
    run();
    best = std::max(best, work / (now_seconds() - start));
  }
  return best;
}

}  // namespace

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  throw InvalidArgument("unknown precision '" + text + "'; choose fp32 or bf16");
}

const char* precision_name(Precision precision) {
  return precision == Precision::fp32 ? "fp32" : "bf16";
}

// Each op on a GPU is at least one kernel issued from the host: an assumed floor per op (see
// HardwareSpec::min_op_seconds), so small models are not estimated faster than launches allow.
constexpr double kGpuMinOpSeconds = 4e-6;

const std::vector<HardwareSpec>& hardware_table() {
  // Dense rates (the sparse figures datasheets also print are twice these). TPUs publish bf16
  // only: their f32 matmuls are several bf16 passes, at no published rate.
  static const std::vector<HardwareSpec> table{
      {"T4", "NVIDIA T4", "gpu", 8.1 * kTera, 0.0, 320 * kGiga,
       "no bf16 (compute capability 7.5); fp32 on CUDA cores",
       "NVIDIA T4 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
       "tesla-t4/t4-tensor-core-datasheet-951643.pdf",
       kGpuMinOpSeconds},
      {"V100", "NVIDIA V100 SXM2", "gpu", 15.7 * kTera, 0.0, 900 * kGiga,
       "no bf16 (compute capability 7.0); fp32 on CUDA cores",
       "NVIDIA V100 datasheet, https://images.nvidia.com/content/technologies/volta/pdf/"
       "volta-v100-datasheet-update-us-1165301-r5.pdf",
       kGpuMinOpSeconds},
      {"A100", "NVIDIA A100 SXM4 80GB", "gpu", 156 * kTera, 312 * kTera, 2039 * kGiga,
       "TF32 tensor cores",
       "NVIDIA A100 datasheet, https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/"
       "a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf",
       kGpuMinOpSeconds},
      {"H100", "NVIDIA H100 SXM5", "gpu", 494.7 * kTera, 989.4 * kTera, 3350 * kGiga,
       "TF32 tensor cores",
       "NVIDIA H100 datasheet, https://resources.nvidia.com/en-us-tensor-core/"
       "nvidia-tensor-core-gpu-datasheet",
       kGpuMinOpSeconds},
      {"H200", "NVIDIA H200 SXM", "gpu", 494.7 * kTera, 989.4 * kTera, 4800 * kGiga,
       "TF32 tensor cores",
       "NVIDIA H200 product page, https://www.nvidia.com/en-us/data-center/h200/",
       kGpuMinOpSeconds},
      {"TPU v3", "Google TPU v3 (per chip)", "tpu", 0.0, 123 * kTera, 900 * kGiga,
       "TPUs publish no fp32 rate", "Cloud TPU v3, https://cloud.google.com/tpu/docs/v3"},
      {"TPU v4", "Google TPU v4 (per chip)", "tpu", 0.0, 275 * kTera, 1200 * kGiga,
       "TPUs publish no fp32 rate", "Cloud TPU v4, https://cloud.google.com/tpu/docs/v4"},
      {"TPU v5e", "Google TPU v5e (per chip)", "tpu", 0.0, 197 * kTera, 819 * kGiga,
       "TPUs publish no fp32 rate", "Cloud TPU v5e, https://cloud.google.com/tpu/docs/v5e"},
      {"TPU v5p", "Google TPU v5p (per chip)", "tpu", 0.0, 459 * kTera, 2765 * kGiga,
       "TPUs publish no fp32 rate", "Cloud TPU v5p, https://cloud.google.com/tpu/docs/v5p"},
      {"TPU v6e", "Google TPU v6e Trillium (per chip)", "tpu", 0.0, 918 * kTera, 1640 * kGiga,
       "TPUs publish no fp32 rate", "Cloud TPU v6e, https://cloud.google.com/tpu/docs/v6e"},
  };
  return table;
}

const HardwareSpec* find_hardware(std::string_view device_name) {
  const std::string name = lower(device_name);
  for (const HardwareSpec& spec : hardware_table()) {
    if (name.find(lower(spec.key)) != std::string::npos) return &spec;
  }
  return nullptr;
}

double peak_flops(const HardwareSpec& spec, Precision precision) {
  return precision == Precision::fp32 ? spec.peak_fp32_flops : spec.peak_bf16_flops;
}

const CpuPeaks& calibrate_cpu(int threads) {
  static std::mutex mutex;
  static std::map<int, CpuPeaks> measured;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto found = measured.find(threads); found != measured.end()) return found->second;
  const int previous_threads = thread_setting();
  set_num_threads(threads);
  CpuPeaks peaks;
  peaks.threads = threads;
  Generator generator(11);
  // Matrices large enough to be compute-bound (512^3 multiply-adds, 3 MiB in f32), small
  // enough that each product takes milliseconds.
  constexpr std::int64_t kSide = 512;
  const double matmul_flops = 2.0 * kSide * kSide * kSide;
  const Tensor a = random_uniform({kSide, kSide}, -1, 1, DType::f32, generator);
  const Tensor b = random_uniform({kSide, kSide}, -1, 1, DType::f32, generator);
  peaks.fp32_flops = best_rate([&] { return matmul(a, b); }, matmul_flops, 100, 0.4);
  const Tensor a16 = cast(a, DType::bf16);
  const Tensor b16 = cast(b, DType::bf16);
  peaks.bf16_flops = best_rate([&] { return matmul(a16, b16); }, matmul_flops, 100, 0.4);
  // Streaming: 32 MiB operands, well past the caches; an add reads two and writes one.
  constexpr std::int64_t kElements = std::int64_t{8} << 20;
  const Tensor x = random_uniform({kElements}, 0, 1, DType::f32, generator);
  const Tensor y = random_uniform({kElements}, 0, 1, DType::f32, generator);
  const double stream_bytes = 3.0 * static_cast<double>(kElements) * 4.0;
  peaks.memory_bandwidth = best_rate([&] { return add(x, y); }, stream_bytes, 30, 0.3);
  set_num_threads(previous_threads);
  return measured.emplace(threads, peaks).first->second;
}

}  // namespace tandem::bench
