#pragma once
// Process-wide runtime settings.
#include <chrono>
#include <cstddef>
#include <string>

#include "tandem/device.h"

namespace tandem {

// Threads used by CPU kernels (oneDNN and Tandem's own loops). A count > 0 is used as given.
// 0, automatic, is the default (unless OMP_NUM_THREADS is set, which counts as a given count):
// the cores this process may use (its CPU affinity, capped by its cgroup's CPU quota), and fewer
// while other processes' runnable threads want those cores, sampled every 100 ms. OpenMP's
// threads spin while they wait, which pays on idle cores and costs several times over on shared
// ones: three runs at once on 2 cores each run on one thread instead of spinning against each
// other. Results then depend on the machine's load as they depend on the thread count (not in
// deterministic mode, below): set a count for the same bits run to run.
void set_num_threads(int threads);
// The most threads a kernel runs on: the count set, or for automatic the cores usable.
int num_threads();
// What set_num_threads last set (0: automatic), for putting it back.
int thread_setting();
// The cores this process may use: its CPU affinity, capped by its cgroup's CPU quota (rounded up).
int usable_cpu_cores();
// The CPU kernels' threads now.
struct CpuThreads {
  int setting = 0;            // thread_setting()
  int active = 1;             // the threads the next kernel runs on
  int usable_cores = 1;       // affinity and cgroup quota
  double other_runnable = 0;  // other processes' threads wanting these cores, smoothed
                              // (sampled in automatic mode only: 0 with a count given)
};
CpuThreads cpu_threads();
// Other processes' runnable threads on this process's usable cores, averaged over `window`
// (sampled every 100 ms; the calling thread sleeps between samples): above about half a core, a
// speed measured now is not comparable with one on a quiet machine.
double measure_other_runnable_threads(std::chrono::milliseconds window);
// Other processes' load, in cores, from which the machine counts as busy for a measurement:
// half a core changes a 2-core figure by a quarter or more.
inline constexpr double kBusyMachineCores = 0.5;

// Deterministic mode (`tandem train --deterministic`, like TensorFlow's
// enable_op_determinism): the kernels whose results would depend on the thread count run in a
// fixed order instead. On the CPU that is oneDNN's convolution backward-filter, batch norm
// (training), matmul and reduction primitives, which split their sums across threads; Tandem's
// own loops give each output element to one thread (or sum fixed slices in order) and replace
// them. With fixed seeds, two runs then give bit-identical weights whatever --threads says, at
// some cost in speed. Off by default.
void set_deterministic(bool deterministic);
bool deterministic();

// Denormal floats (magnitudes below 1.2e-38 in f32, 2.2e-308 in f64) read and written as zero by
// CPU kernels, as TensorFlow and XLA do: on x86 each operation on one takes about a hundred
// cycles, and values that shrink every step fall into that range (Adam's moments of a weight
// whose gradient stays zero decay by 0.9 and 0.999 a step: the main job's CNN trained 7-11%
// slower without this). The calling thread's own setting is restored after every kernel; the
// OpenMP threads that run kernels keep it. On by default; off keeps IEEE gradual underflow.
// x86 only (elsewhere a no-op).
void set_flush_denormals(bool flush);
bool flush_denormals();

// Memory Tandem holds on a device: tensors and backend workspaces, counted by its allocators.
struct MemoryInfo {
  std::size_t held = 0;      // bytes allocated now
  std::size_t peak = 0;      // the most held at once since start (or reset_peak_memory)
  std::size_t limit = 0;     // the cap set_memory_limit put on it; 0 when none
  std::size_t capacity = 0;  // the device's memory (host RAM for the CPU); 0 when unknown
};
MemoryInfo memory_info(Device device);
// Caps what Tandem allocates on `device` (0 lifts the cap): an allocation that would pass it
// throws OutOfMemory, as a full device does. Lets a smaller device be emulated, e.g. to find the
// largest batch that fits one (tandem train --find-max-batch --memory-limit).
void set_memory_limit(Device device, std::size_t bytes);
void reset_peak_memory(Device device);
// "1.50 GiB", "512.0 MiB", "12 bytes"
std::string format_memory_size(std::size_t bytes);

// Tandem's version, e.g. "0.1.0".
const char* version();
// oneDNN's version and the CPU instruction set it dispatches to, e.g. "oneDNN 2.6.3
// (avx512_core_bf16)", with what that set lacks: "oneDNN 2.6.3 (avx2; no AVX-512: bf16 ops on
// Tandem's loops; no VNNI: int8 products in f32)".
std::string cpu_backend_description();
// What runs on oneDNN's kernels on this CPU. bf16 ops need AVX-512: without it they run on
// Tandem's loops, many times slower than f32. int8 products (quantised models) need VNNI: without
// it they run in f32 on the dequantised operands, the same results at f32's speed.
struct CpuKernels {
  bool bf16 = false;
  bool int8 = false;
};
CpuKernels cpu_kernels();

}  // namespace tandem
