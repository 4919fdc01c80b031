#pragma once
// The CPU backend: oneDNN for the heavy ops (conv, matmul, pooling, batch norm, eltwise, binary,
// softmax, reduction, reorders) in f32/bf16, and plain vectorisable OpenMP loops for everything
// oneDNN lacks (f64, integers, bool, general broadcasting), which also serve as the reference
// the oneDNN paths are tested against.
#include <cstdint>

#include "ops/backend.h"

namespace tandem::cpu {

using KernelTable = FunctionKernelTable;

constexpr std::uint32_t all_dtypes_mask() {
  return kEveryDType;
}
constexpr std::uint32_t floating_dtypes_mask() {  // f32, f64, bf16, f16
  return dtype_mask({DType::f32, DType::f64, DType::bf16, DType::f16});
}

// Each kernel family file registers its kernels; cpu_backend.cpp calls them all.
void register_elementwise_kernels(KernelTable& table);
// out = out + residual, then relu when `relu`, as the add and relu kernels would give it (each
// step rounded to out's dtype): a fused residual's fallback where oneDNN's post-op cannot serve.
void add_residual(const Tensor& residual, const Tensor& out, bool relu);
// The float conv2d (and its backward ops) and matmul kernels, which the integer products run on
// where oneDNN's int8 kernels are inexact (OnednnIsa::exact_int8).
void conv_kernel(const KernelContext& c);
void matmul_kernel(const KernelContext& c);
// max_pool2d_backward's kernel, which pooled_conv2d_backward_filter's runs where it forms the
// whole gradient.
void max_pool_backward_kernel(const KernelContext& c);
void register_reduction_kernels(KernelTable& table);
void register_linalg_kernels(KernelTable& table);
void register_conv_kernels(KernelTable& table);
// Whether pooled_conv2d's kernel forms the convolution a band of rows at a time on these inputs
// and attributes (f32, no residual, the few-channel forward loops' windows on AVX-512); elsewhere
// it runs conv2d's kernel and pools the whole result.
bool pooled_conv_forms_bands(std::span<const TensorMeta> inputs, const Attrs& attrs);
void register_pool_kernels(KernelTable& table);
void register_norm_kernels(KernelTable& table);
void register_softmax_kernels(KernelTable& table);
void register_layout_kernels(KernelTable& table);
void register_loss_kernels(KernelTable& table);
void register_dropout_kernels(KernelTable& table);
void register_quantize_kernels(KernelTable& table);
void register_optimizer_kernels(KernelTable& table);
void register_gather_kernels(KernelTable& table);
void register_layer_norm_kernels(KernelTable& table);
void register_collective_kernels(KernelTable& table);

}  // namespace tandem::cpu
