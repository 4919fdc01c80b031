// CUDA pooling over NHWC: max and average pooling with TensorFlow's SAME padding (which may pad
// more after than before, which cuDNN's symmetric pooling cannot express), their backward
// kernels, and global average pooling. One thread per output element (channels fastest, so
// neighbouring threads read neighbouring memory); the backward kernels scatter with float
// atomics, since windows overlap when the stride is smaller than the window.
#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"
#include "ops/window.h"

namespace tandem::cuda {
namespace {

struct Geometry {
  std::int64_t batch, in_h, in_w, channels, k_h, k_w, out_h, out_w;
  std::int64_t stride_h, stride_w, pad_top, pad_left;
};

Geometry geometry_of(const Window2D& window) {
  return {window.batch,      window.in_h,       window.in_w,          window.in_c,
          window.k_h,        window.k_w,        window.out_h,         window.out_w,
          window.strides[0], window.strides[1], window.pad_before[0], window.pad_before[1]};
}

// The output position (n, oh, ow, c) of a linear output index.
struct Position {
  std::int64_t n, oh, ow, c;
};

__device__ inline Position position_of(std::int64_t i, const Geometry& g) {
  Position p;
  p.c = i % g.channels;
  i /= g.channels;
  p.ow = i % g.out_w;
  i /= g.out_w;
  p.oh = i % g.out_h;
  p.n = i / g.out_h;
  return p;
}

// Calls cell(input offset) for every window cell of p that lies inside the input, row by row.
template <typename Cell>
__device__ inline void for_each_cell(const Position& p, const Geometry& g, Cell&& cell) {
  for (std::int64_t kh = 0; kh < g.k_h; ++kh) {
    const std::int64_t ih = p.oh * g.stride_h - g.pad_top + kh;
    if (ih < 0 || ih >= g.in_h) continue;
    for (std::int64_t kw = 0; kw < g.k_w; ++kw) {
      const std::int64_t iw = p.ow * g.stride_w - g.pad_left + kw;
      if (iw < 0 || iw >= g.in_w) continue;
      cell(((p.n * g.in_h + ih) * g.in_w + iw) * g.channels + p.c);
    }
  }
}

template <typename T>
__global__ void max_pool_kernel(const T* x, T* y, std::int64_t count, Geometry g) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  float best = MaxOp<float>::identity();
  for_each_cell(position_of(i, g), g,
                [&](std::int64_t offset) { best = fmaxf(best, load(x, offset)); });
  y[i] = convert_to<T>(best);
}

// The gradient goes to the first maximum of the window in scan order, as on the CPU; with
// relu_masked, nowhere when that maximum is not positive (relu's backward pass on the same cells,
// for x that is a relu's output).
template <typename T>
__global__ void max_pool_backward_kernel(const T* dy, const T* x, float* dx, std::int64_t count,
                                         Geometry g, bool relu_masked) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  float best = 0;
  std::int64_t best_offset = -1;
  for_each_cell(position_of(i, g), g, [&](std::int64_t offset) {
    const float value = load(x, offset);
    if (best_offset < 0 || value > best) {
      best = value;
      best_offset = offset;
    }
  });
  if (best_offset >= 0 && (!relu_masked || best > 0)) atomicAdd(dx + best_offset, load(dy, i));
}

// Averages count only the cells inside the input, as TensorFlow does.
template <typename T>
__global__ void avg_pool_kernel(const T* x, T* y, std::int64_t count, Geometry g) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  float total = 0;
  int cells = 0;
  for_each_cell(position_of(i, g), g, [&](std::int64_t offset) {
    total += load(x, offset);
    ++cells;
  });
  y[i] = convert_to<T>(cells > 0 ? total / static_cast<float>(cells) : 0.0f);
}

template <typename T>
__global__ void avg_pool_backward_kernel(const T* dy, float* dx, std::int64_t count, Geometry g) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const Position p = position_of(i, g);
  int cells = 0;
  for_each_cell(p, g, [&](std::int64_t) { ++cells; });
  if (cells == 0) return;
  const float share = load(dy, i) / static_cast<float>(cells);
  for_each_cell(p, g, [&](std::int64_t offset) { atomicAdd(dx + offset, share); });
}

void run_pool(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  const std::int64_t count = y.numel();
  if (count == 0) return;
  const Geometry g =
      geometry_of(pool_window(op_name(c.kind), x.shape(), read_attrs<Pool2DOptions>(c.attrs)));
  visit_floating(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    if (c.kind == OpKind::max_pool2d) {
      max_pool_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(in, out, count, g);
    } else {
      avg_pool_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(in, out, count, g);
    }
  });
}

// dx accumulates in a float scratch (or in dx itself when it is f32), then is converted.
void run_pool_backward(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& dy = c.inputs[0];
  const Tensor& dx = c.outputs[0];
  const bool max_pool = c.kind == OpKind::max_pool2d_backward;
  const bool relu_masked = max_pool && op_attrs<OpKind::max_pool2d_backward>(c.attrs).relu_masked;
  const Shape input_shape = max_pool
                                ? c.inputs[1].shape()
                                : Shape(op_attrs<OpKind::avg_pool2d_backward>(c.attrs).input_shape);
  const Geometry g =
      geometry_of(pool_window(op_name(c.kind), input_shape, read_attrs<Pool2DOptions>(c.attrs)));
  const Tensor sums =
      dx.dtype() == DType::f32 ? dx : Tensor::empty(dx.shape(), DType::f32, dx.device());
  check(cudaMemsetAsync(sums.raw_data(), 0, sums.nbytes(), context.stream), "cudaMemsetAsync");
  const std::int64_t count = dy.numel();
  if (count > 0) {
    visit_floating(dy.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* upstream = static_cast<const T*>(dy.raw_data());
      float* target = static_cast<float*>(sums.raw_data());
      if (max_pool) {
        max_pool_backward_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
            upstream, static_cast<const T*>(c.inputs[1].raw_data()), target, count, g, relu_masked);
      } else {
        avg_pool_backward_kernel<T>
            <<<blocks_for(count), 256, 0, context.stream>>>(upstream, target, count, g);
      }
    });
  }
  if (sums.raw_data() != dx.raw_data()) {
    convert(context, sums.raw_data(), DType::f32, dx.raw_data(), dx.dtype(), dx.numel());
  }
}

// (N, H, W, C) -> (N, C): the mean over the middle of an (N, H W, C) view.
void run_global_avg_pool(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[0];
  const std::int64_t cells = x.dim(1) * x.dim(2);
  reduce_middle(context, x.raw_data(), x.dtype(), c.outputs[0].raw_data(), c.outputs[0].dtype(),
                x.dim(0), cells, x.dim(3), Reduction::sum,
                cells > 0 ? 1.0 / static_cast<double>(cells) : 1.0);
}

}  // namespace

void register_pool_kernels(KernelTable& table) {
  const std::uint32_t floating = floating_mask();
  table.set(OpKind::max_pool2d, run_pool, floating);
  table.set(OpKind::avg_pool2d, run_pool, floating);
  // Overlapping windows add into dx with atomics.
  table.set(OpKind::max_pool2d_backward, run_pool_backward, floating, kSumsWithAtomics);
  table.set(OpKind::avg_pool2d_backward, run_pool_backward, floating, kSumsWithAtomics);
  table.set(OpKind::global_avg_pool2d, run_global_avg_pool, floating);
}

}  // namespace tandem::cuda
