#include "backend/cpu/cpu_backend.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "backend/cpu/denormals.h"
#include "backend/cpu/onednn.h"
#include "backend/cpu/thread_budget.h"
#include "tandem/runtime.h"

#ifndef TANDEM_VERSION
#define TANDEM_VERSION "0.0.0"
#endif

namespace tandem {
namespace cpu {

namespace {

const KernelTable& kernels() {
  static const KernelTable table = [] {
    KernelTable filled;
    register_elementwise_kernels(filled);
    register_reduction_kernels(filled);
    register_linalg_kernels(filled);
    register_conv_kernels(filled);
    register_pool_kernels(filled);
    register_norm_kernels(filled);
    register_softmax_kernels(filled);
    register_layout_kernels(filled);
    register_loss_kernels(filled);
    register_dropout_kernels(filled);
    register_quantize_kernels(filled);
    register_optimizer_kernels(filled);
    register_gather_kernels(filled);
    register_layer_norm_kernels(filled);
    register_collective_kernels(filled);
    return filled;
  }();
  return table;
}

class CpuBackend final : public TableBackend {
 public:
  CpuBackend() : TableBackend(kernels()) {}
  void run(const KernelContext& context) override {
    apply_kernel_threads();
    const DenormalModeScope denormal_mode;
    TableBackend::run(context);
  }
  bool fused_kernel_gains(OpKind kind, std::span<const TensorMeta> inputs,
                          const Attrs& attrs) const override {
    return kind == OpKind::pooled_conv2d && pooled_conv_forms_bands(inputs, attrs);
  }
  DeviceType device_type() const override { return DeviceType::cpu; }
  const char* name() const override { return "cpu"; }
  void synchronize() override {}
};

const BackendRegistration registration(
    DeviceType::cpu,
    [](std::string&) -> Backend* {
      static CpuBackend backend;
      return &backend;
    },
    [](OpKind kind) { return kernels().facts(kind); });

}  // namespace
}  // namespace cpu

// The linker keeps this file, and with it the registration, because CMake asks for this symbol.
extern "C" void tandem_link_cpu_backend() {}

namespace cpu {

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
    case DType::i8:
      return dt::s8;
    default:
      return std::nullopt;
  }
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

void PrimitiveArguments::bind(int arg, const dnnl::memory::desc& desc, const Tensor& tensor) {
  void* data = tensor.raw_data();
  for (Bound& bound : bound_) {
    if (bound.arg != arg) continue;
    if (bound.data == nullptr) {  // a memory object of its own until now
      bound.memory = wrap(desc, tensor);
    } else if (bound.data != data) {
      bound.memory.set_data_handle(data);
    }
    bound.data = data;
    return;
  }
  bound_.push_back(Bound{arg, wrap(desc, tensor), data});
}

void PrimitiveArguments::bind(int arg, const dnnl::memory& memory) {
  for (Bound& bound : bound_) {
    if (bound.arg != arg) continue;
    bound.memory = memory;
    bound.data = nullptr;
    return;
  }
  bound_.push_back(Bound{arg, memory, nullptr});
}

void PrimitiveArguments::clear() {
  bound_.clear();
}

void PrimitiveArguments::execute(const dnnl::primitive& primitive) {
  list_.clear();
  for (const Bound& bound : bound_)
    list_.push_back(dnnl_exec_arg_t{bound.arg, bound.memory.get()});
  dnnl::error::wrap_c_api(dnnl_primitive_execute(primitive.get(), onednn_stream().get(),
                                                 static_cast<int>(list_.size()), list_.data()),
                          "could not execute a primitive");
  onednn_stream().wait();
}

dnnl::primitive_attr fused_post_ops(Residual residual, const dnnl::memory::desc& operand,
                                    bool relu) {
  dnnl::primitive_attr attr;
  dnnl::post_ops ops;
  if (residual == Residual::operand) ops.append_binary(dnnl::algorithm::binary_add, operand);
  if (residual == Residual::in_destination) ops.append_sum(1.0f);
  if (relu) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  attr.set_post_ops(ops);
  return attr;
}

const OnednnIsa& onednn_isa() {
  static const OnednnIsa isa = [] {
    switch (dnnl::get_effective_cpu_isa()) {
      case dnnl::cpu_isa::sse41:
        return OnednnIsa{"sse4.1", false, false, false};
      case dnnl::cpu_isa::avx:
        return OnednnIsa{"avx", false, false, false};
      case dnnl::cpu_isa::avx2:
        return OnednnIsa{"avx2", false, false, false};
      case dnnl::cpu_isa::avx2_vnni:
        return OnednnIsa{"avx2_vnni", false, true, false};
      case dnnl::cpu_isa::avx512_core:
        return OnednnIsa{"avx512_core", true, false, false};
      case dnnl::cpu_isa::avx512_core_vnni:
        return OnednnIsa{"avx512_core_vnni", true, true, false};
      case dnnl::cpu_isa::avx512_core_bf16:
        return OnednnIsa{"avx512_core_bf16", true, true, false};
      case dnnl::cpu_isa::avx512_core_amx:
        return OnednnIsa{"avx512_core_amx", true, true, true};
      default:
        return OnednnIsa{"baseline", false, false, false};
    }
  }();
  return isa;
}

MatmulExtents onednn_matmul_extents(std::int64_t k, std::int64_t n, DType dtype) {
  constexpr std::int64_t kBlock = 64;
  const auto whole_blocks = [](std::int64_t extent) {
    return (extent + kBlock - 1) / kBlock * kBlock;
  };
  if (!onednn_isa().amx) return {k, n};
  // bf16: with N in whole blocks, only summed lengths ending 31 into a 32-element tile failed.
  if (dtype == DType::bf16) return {k % 32 == 31 ? whole_blocks(k) : k, whole_blocks(n)};
  if (dtype == DType::u8 || dtype == DType::i8) return {whole_blocks(k), n};
  return {k, n};
}

bool onednn_float_kernels(DType dtype) {
  return dtype == DType::f32 || (dtype == DType::bf16 && onednn_isa().bf16);
}

bool is_reference_implementation(const char* impl_info) {
  return std::string_view(impl_info).starts_with("ref");
}

void execute(const dnnl::primitive& primitive, const std::unordered_map<int, dnnl::memory>& args) {
  primitive.execute(onednn_stream(), args);
  onednn_stream().wait();
}

}  // namespace cpu

const char* version() {
  return TANDEM_VERSION;
}

std::string cpu_backend_description() {
  const dnnl_version_t* onednn = dnnl_version();
  const cpu::OnednnIsa& isa = cpu::onednn_isa();
  std::string notes;
  if (!isa.bf16) notes += "; no AVX-512: bf16 ops on Tandem's loops";
  if (!isa.exact_int8) notes += "; no VNNI: int8 products in f32";
  return "oneDNN " + std::to_string(onednn->major) + "." + std::to_string(onednn->minor) + "." +
         std::to_string(onednn->patch) + " (" + isa.name + notes + ")";
}

CpuKernels cpu_kernels() {
  return {cpu::onednn_isa().bf16, cpu::onednn_isa().exact_int8};
}

}  // namespace tandem
