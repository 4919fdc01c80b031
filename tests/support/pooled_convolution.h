#pragma once
// Whether the CPU backend forms a convolution pooled as it is formed (pooled_conv2d) for a
// first layer's shapes, so that a compiled step's fusion pass makes one: on CPUs with AVX-512
// (the few-channel loops), not elsewhere. Tests of the pass expect the fused node where it says so.
#include "ops/backend.h"
#include "ops/fused.h"
#include "ops/op_attrs.h"

namespace tandem::testing {

// x (N, H, W, C_in) f32 convolved with a filter (KH, KW, C_in, C_out), relu fused, then 2x2 max
// pooling of stride 2.
inline bool cpu_pools_as_it_convolves(const Shape& x, const Shape& filter) {
  const TensorMeta inputs[] = {{x, DType::f32}, {filter, DType::f32}};
  Conv2DAttrs convolution;
  convolution.fused_relu = true;
  return backend_for(Device::cpu())
      .fused_kernel_gains(OpKind::pooled_conv2d, inputs,
                          pooled_conv2d_attrs(make_op_attrs<OpKind::conv2d>(convolution),
                                              make_op_attrs<OpKind::max_pool2d>(Pool2DOptions{})));
}

}  // namespace tandem::testing
