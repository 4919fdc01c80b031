#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "backend/cpu/onednn.h"
#include "tandem/runtime.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "0.0.0"
#endif

namespace tandem {
namespace cpu {

std::uint32_t dtype_mask(std::initializer_list<DType> dtypes) {
  std::uint32_t mask = 0;
  for (DType dtype : dtypes)
    mask |= 1u << static_cast<unsigned>(dtype);
  return mask;
}
std::uint32_t all_dtypes_mask() {
  return (1u << kNumDTypes) - 1;
}
std::uint32_t floating_dtypes_mask() {
  return dtype_mask({DType::f32, DType::f64, DType::bf16, DType::f16});
}

namespace {

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    register_elementwise_kernels(kernels_);
    register_reduction_kernels(kernels_);
    register_linalg_kernels(kernels_);
    register_conv_kernels(kernels_);
    register_pool_kernels(kernels_);
    register_norm_kernels(kernels_);
    register_softmax_kernels(kernels_);
    register_layout_kernels(kernels_);
    register_loss_kernels(kernels_);
    register_dropout_kernels(kernels_);
    register_optimizer_kernels(kernels_);
    register_gather_kernels(kernels_);
    register_layer_norm_kernels(kernels_);
  }
  DeviceType device_type() const override { return DeviceType::cpu; }
  const char* name() const override { return "cpu"; }
  bool supports(OpKind kind, DType dtype) const override {
    const Kernel& kernel = kernels_[static_cast<std::size_t>(kind)];
    return kernel.run != nullptr && (kernel.dtype_mask >> static_cast<unsigned>(dtype)) & 1u;
  }
  void run(const KernelContext& context) override {
    kernels_[static_cast<std::size_t>(context.kind)].run(context);
  }
  void synchronize() override {}

 private:
  KernelTable kernels_{};
};

}  // namespace

dnnl::engine& onednn_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

dnnl::stream& onednn_stream() {
  // One stream per thread: the prefetch thread may run ops while the trainer does.
  thread_local dnnl::stream stream(onednn_engine());
  return stream;
}

std::optional<dnnl::memory::data_type> onednn_data_type(DType dtype) {
  using dt = dnnl::memory::data_type;
  switch (dtype) {
    case DType::f32:
      return dt::f32;
    case DType::bf16:
      return dt::bf16;
    case DType::f16:
      return dt::f16;
    case DType::i32:
      return dt::s32;
    case DType::u8:
      return dt::u8;
    default:
      return std::nullopt;
  }
}

bool onednn_supports(DType dtype) {
  return onednn_data_type(dtype).has_value();
}

dnnl::memory::dims onednn_dims(const Shape& shape) {
  if (shape.empty()) return {1};
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::desc plain_desc(const Shape& shape, DType dtype) {
  const dnnl::memory::dims dims = onednn_dims(shape);
  dnnl::memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * dims[i + 1];
  return dnnl::memory::desc(dims, *onednn_data_type(dtype), strides);
}

dnnl::memory::desc nhwc_desc(const Shape& nhwc_shape, DType dtype) {
  const dnnl::memory::dims nchw = {nhwc_shape[0], nhwc_shape[3], nhwc_shape[1], nhwc_shape[2]};
  return dnnl::memory::desc(nchw, *onednn_data_type(dtype), dnnl::memory::format_tag::nhwc);
}

dnnl::memory wrap(const dnnl::memory::desc& desc, const Tensor& tensor) {
  return dnnl::memory(desc, onednn_engine(), tensor.raw_data());
}

void execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  primitive.execute(onednn_stream(), args);
  onednn_stream().wait();
}

}  // namespace cpu

Backend& cpu_backend() {
  static cpu::CpuBackend backend;
  return backend;
}

void set_num_threads(int threads) {
  omp_set_num_threads(threads > 0 ? threads : omp_get_num_procs());
}

int num_threads() {
  return omp_get_max_threads();
}

const char* version() {
  return TANDEM_VERSION;
}

std::string cpu_backend_description() {
  const dnnl_version_t* onednn = dnnl_version();
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      isa = "sse4.1";
      break;
    case dnnl::cpu_isa::avx:
      isa = "avx";
      break;
    case dnnl::cpu_isa::avx2:
      isa = "avx2";
      break;
    case dnnl::cpu_isa::avx2_vnni:
      isa = "avx2_vnni";
      break;
    case dnnl::cpu_isa::avx512_core:
      isa = "avx512_core";
      break;
    case dnnl::cpu_isa::avx512_core_vnni:
      isa = "avx512_core_vnni";
      break;
    case dnnl::cpu_isa::avx512_core_bf16:
      isa = "avx512_core_bf16";
      break;
    case dnnl::cpu_isa::avx512_core_amx:
      isa = "avx512_core_amx";
      break;
    default:
      isa = "baseline";
      break;
  }
  return "oneDNN " + std::to_string(onednn->major) + "." + std::to_string(onednn->minor) + "." +
         std::to_string(onednn->patch) + " (" + isa + ")";
}

}  // namespace tandem
