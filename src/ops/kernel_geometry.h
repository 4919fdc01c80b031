#pragma once
// How kernels see their operands, shared by every backend so the CPU and CUDA kernels agree on
// it by construction: a tensor viewed around one axis, the dimensions of a (batched) matmul, and
// the coalesced strides of a broadcast.
#include <array>
#include <cstdint>
#include <vector>

#include "ops/backend.h"
#include "ops/op_attrs.h"
#include "tandem/tensor.h"

namespace tandem {

// A tensor as (outer, length, inner) with one axis in the middle (softmax, layer norm rows).
struct AxisView {
  std::int64_t outer = 1;
  std::int64_t length = 1;
  std::int64_t inner = 1;
};

// `axis` may be negative (counted from the end).
inline AxisView axis_view(const Tensor& x, std::int64_t axis) {
  const auto resolved = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
  AxisView view;
  for (int i = 0; i < x.rank(); ++i) {
    if (i < resolved) view.outer *= x.dim(i);
    if (i > resolved) view.inner *= x.dim(i);
  }
  view.length = x.dim(resolved);
  return view;
}

// A tensor (..., C) as `rows` rows of its last axis's `length` values (batch and layer norm);
// no rows when C is 0.
struct LastAxisRows {
  std::int64_t rows = 0;
  std::int64_t length = 0;
};

inline LastAxisRows last_axis_rows(const Tensor& x) {
  const std::int64_t length = x.dim(-1);
  return {length == 0 ? 0 : x.numel() / length, length};
}

// The dimensions of matmul(a, b [, bias]): `batch` products of (M, K) x (K, N).
struct MatmulShape {
  std::int64_t batch = 1;
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t n = 0;
  bool transpose_a = false;
  bool transpose_b = false;
  bool b_batched = false;
  bool has_bias = false;
  bool fused_relu = false;
  bool fused_add = false;  // the residual is the last input
};

inline MatmulShape matmul_shape(const KernelContext& c) {
  const Tensor& a = c.inputs[0];  // (..., M, K) or (..., K, M)
  const Tensor& b = c.inputs[1];  // (..., K, N) or (..., N, K), or 2-D
  MatmulShape s;
  s.transpose_a = op_attrs<OpKind::matmul>(c.attrs).transpose_a;
  s.transpose_b = op_attrs<OpKind::matmul>(c.attrs).transpose_b;
  s.fused_relu = op_attrs<OpKind::matmul>(c.attrs).fused_relu;
  s.fused_add = op_attrs<OpKind::matmul>(c.attrs).fused_add;
  s.m = s.transpose_a ? a.dim(-1) : a.dim(-2);
  s.k = s.transpose_a ? a.dim(-2) : a.dim(-1);
  s.n = s.transpose_b ? b.dim(-2) : b.dim(-1);
  for (int axis = 0; axis < a.rank() - 2; ++axis)
    s.batch *= a.dim(axis);
  s.b_batched = b.rank() > 2;
  s.has_bias = has_bias_input(c.inputs.size(), s.fused_add);
  // A shared b and an untransposed a: the batch folds into M, giving one taller product.
  if (!s.b_batched && !s.transpose_a) {
    s.m *= s.batch;
    s.batch = 1;
  }
  return s;
}

// An output shape and its NumPy-broadcast inputs as few axes as possible: adjacent axes whose
// strides continue each other are merged, size-1 axes dropped. strides[axis][input] is 0 where
// the input broadcasts. Never empty: a scalar output is one axis of extent 1.
template <int kInputs>
struct CoalescedBroadcast {
  std::vector<std::int64_t> extents;
  std::vector<std::array<std::int64_t, kInputs>> strides;
};

template <int kInputs>
CoalescedBroadcast<kInputs> coalesce_broadcast(
    const Shape& out_shape, const std::array<const Shape*, kInputs>& input_shapes) {
  const std::size_t rank = out_shape.size();
  // Per-input strides aligned to the output's rank, 0 where the input broadcasts.
  std::vector<std::array<std::int64_t, kInputs>> strides(rank);
  for (int k = 0; k < kInputs; ++k) {
    const Shape& shape = *input_shapes[k];
    const std::size_t offset = rank - shape.size();
    std::int64_t stride = 1;
    for (std::size_t i = rank; i-- > 0;) {
      const std::int64_t extent = i < offset ? 1 : shape[i - offset];
      strides[i][k] = extent == 1 ? 0 : stride;
      stride *= extent;
    }
  }
  CoalescedBroadcast<kInputs> result;
  for (std::size_t i = 0; i < rank; ++i) {
    if (out_shape[i] == 1) continue;
    if (!result.extents.empty()) {
      bool continues = true;
      for (int k = 0; k < kInputs; ++k) {
        if (result.strides.back()[k] != strides[i][k] * out_shape[i]) continues = false;
      }
      if (continues) {
        result.extents.back() *= out_shape[i];
        result.strides.back() = strides[i];
        continue;
      }
    }
    result.extents.push_back(out_shape[i]);
    result.strides.push_back(strides[i]);
  }
  if (result.extents.empty()) {
    result.extents.push_back(1);
    result.strides.push_back({});
  }
  return result;
}

}  // namespace tandem
