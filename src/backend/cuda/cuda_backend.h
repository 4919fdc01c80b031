#pragma once
// The CUDA backend's internals shared by its files: the kernel table (shaped like the CPU
// backend's), one context per GPU (its stream and library handles), detection of bad input
// values on the device, and the helpers kernel families share. Every kernel runs on its GPU's
// one stream, in issue order; memory comes from that stream's pool (cudaMallocAsync), so a
// tensor freed on the host while kernels still use it is released only after them.
#include <array>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <vector>

#include "backend/cuda/cuda_api.h"
#include "ops/backend.h"

namespace tandem::cuda {

using KernelTable = FunctionKernelTable;

// The dtype groups the kernels cover. f64 has no CUDA kernels (GPUs run it at a fraction of
// the f32 rate); the error says to cast.
constexpr std::uint32_t floating_mask() {
  return dtype_mask({DType::f32, DType::bf16, DType::f16});
}
constexpr std::uint32_t numeric_mask() {
  return dtype_mask({DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64});
}
constexpr std::uint32_t every_dtype_mask() {
  return kEveryDType;
}
// Why a kernel that adds partial results with atomics gives other bits from run to run: the
// order the threads finish in decides the order of the sums.
inline constexpr const char* kSumsWithAtomics = "sums with atomics";

// Every kernel of the backend, filled by the family files (register_*_kernels below); it needs
// no GPU, so deterministic mode knows the kernels' facts on any machine.
const KernelTable& kernels();

// A BadValueCheck inside a recorded CUDA graph: each replay keeps the smallest bad position in
// pinned slot `slot` of DeviceContext::recorded_slots (~0 while there is none), read at
// synchronisations and before later replays.
struct RecordedCheck {
  int slot = 0;
  std::function<std::string(std::int64_t position)> message;  // what a bad position means
};

struct DeviceContext {
  int index = 0;
  cudaStream_t stream = nullptr;
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t cublaslt = nullptr;
  int multiprocessors = 0;
  // Device slot and pinned host mirror for BadValueCheck.
  unsigned long long* bad_position = nullptr;
  unsigned long long* bad_position_host = nullptr;
  // Pinned slots for the checks of recorded graphs (RecordedCheck; the kernels write them through
  // recorded_slots_on_device, their device address), those free, and while a step is being
  // recorded, the checks recorded so far.
  unsigned long long* recorded_slots = nullptr;
  unsigned long long* recorded_slots_on_device = nullptr;
  std::vector<int> free_recorded_slots;
  std::vector<RecordedCheck>* recording_checks = nullptr;
};

// Makes `device` current on this thread and returns its context.
DeviceContext& enter(Device device);
// The device of a kernel's tensors (outputs, else inputs).
DeviceContext& enter(const KernelContext& context);

// CUDA events around an op on `device`'s stream, for the profiler (event_timer.cpp).
std::unique_ptr<KernelTimer> make_event_timer(Device device);

// Kernels that read labels or indices record the position of the first value out of range;
// first() waits for the stream and returns it (or -1). The slot is per GPU, so a check is armed,
// launched and read before the next one. While a step is recorded into a CUDA graph the stream
// cannot be waited for: first() then records a kernel keeping the position in a pinned slot and
// returns -1; the slots are read at synchronisations and before later replays, a bad position
// throwing InvalidArgument with `recorded_message(position)` (the values themselves are gone).
class BadValueCheck {
 public:
  explicit BadValueCheck(DeviceContext& context);
  unsigned long long* slot() const { return context_.bad_position; }
  std::int64_t first(std::function<std::string(std::int64_t position)> recorded_message);

 private:
  DeviceContext& context_;
};

// Inside a recording: a kernel that lowers pinned `slot` (a device address) to the check's
// position where that is smaller (gather.cu).
void keep_bad_position(DeviceContext& context, unsigned long long* slot);

// Launch geometry for `count` independent elements.
inline unsigned blocks_for(std::int64_t count, unsigned threads = 256) {
  const std::int64_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > 2147483647 ? 2147483647 : blocks));
}

// ---- helpers the kernel families share (defined in the .cu files) ----
enum class Reduction { sum, max };

// x viewed as (outer, length, inner) reduced over `length` into out (outer, inner), in float
// (int64 for integers), times `scale` (1 / length gives a mean). Any dtype pair the kernels
// cover; out may have another floating dtype than x.
void reduce_middle(DeviceContext& context, const void* x, DType x_dtype, void* out, DType out_dtype,
                   std::int64_t outer, std::int64_t length, std::int64_t inner, Reduction reduction,
                   double scale);

// out = x with its axes permuted (out.dim(i) = x.dim(perm[i])); any dtype.
void permute(DeviceContext& context, const Tensor& x, const Tensor& out,
             const std::vector<std::int64_t>& permutation);

// out (x's rank) = x placed at `offset` per axis, the rest filled with `fill` (raw bits of one
// element of x's dtype); or, with `extract`, out = the block of x starting at `offset`.
void copy_window(DeviceContext& context, const Tensor& x, const Tensor& out,
                 const std::vector<std::int64_t>& offset, bool extract, std::uint64_t fill);

// out = x broadcast to out's shape (NumPy rules); any dtype.
void broadcast_into(DeviceContext& context, const Tensor& x, const Tensor& out);

// out (..., C) += bias (C,) in place; floating dtypes.
void add_channel_bias(DeviceContext& context, const Tensor& bias, const Tensor& out);

// out = relu(out + residual) in place (the residual, of out's shape, where given; the relu where
// asked), each step rounded as the add and relu ops round: the epilogue of a fused conv2d or an
// empty matmul (the fusion pass's nodes, compile/passes.h) after the product and the bias.
void add_residual_relu(DeviceContext& context, const Tensor* residual, bool relu,
                       const Tensor& out);

// Converts `count` elements between any two dtypes.
void convert(DeviceContext& context, const void* x, DType x_dtype, void* out, DType out_dtype,
             std::int64_t count);

// Kernel families; each fills its ops' entries.
void register_elementwise_kernels(KernelTable& table);
void register_reduction_kernels(KernelTable& table);
void register_layout_kernels(KernelTable& table);
void register_softmax_kernels(KernelTable& table);
void register_dropout_kernels(KernelTable& table);
void register_quantize_kernels(KernelTable& table);
void register_optimizer_kernels(KernelTable& table);
void register_gather_kernels(KernelTable& table);
void register_layer_norm_kernels(KernelTable& table);
void register_pool_kernels(KernelTable& table);
void register_matmul_kernels(KernelTable& table);
void register_conv_kernels(KernelTable& table);
void register_norm_kernels(KernelTable& table);

}  // namespace tandem::cuda
