// CUDA layout ops: transpose, slice, pad and concat move elements (kernels typed by element
// size, so every dtype shares them); reshape is a view and runs no kernel. permute and
// copy_window serve the other kernel families too (reductions over scattered axes, convolution
// filters, asymmetric padding).
#include <cstring>

#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

// Per output axis: its extent and the input's element stride along it.
struct GatherIndex {
  int rank = 0;
  std::int64_t extents[kMaxRank] = {};
  std::int64_t strides[kMaxRank] = {};

  __device__ std::int64_t offset(std::int64_t linear) const {
    std::int64_t result = 0;
    for (int axis = rank - 1; axis >= 0; --axis) {
      result += (linear % extents[axis]) * strides[axis];
      linear /= extents[axis];
    }
    return result;
  }
};

std::vector<std::int64_t> contiguous_strides(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

void require_rank(const char* op, const Shape& shape) {
  if (shape.size() > static_cast<std::size_t>(kMaxRank)) {
    throw InvalidArgument(std::string(op) + ": the CUDA backend handles up to rank " +
                          std::to_string(kMaxRank) + ", got shape " + shape_str(shape));
  }
}

template <typename T>
__global__ void gather_kernel(const T* x, T* out, std::int64_t count, std::int64_t base,
                              GatherIndex index) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i < count) out[i] = x[base + index.offset(i)];
}

// out coordinates minus `offset` index x where inside it; `fill` elsewhere.
struct PlaceIndex {
  int rank = 0;
  std::int64_t out_extents[kMaxRank] = {};
  std::int64_t x_extents[kMaxRank] = {};
  std::int64_t x_strides[kMaxRank] = {};
  std::int64_t offset[kMaxRank] = {};
};

template <typename T>
__global__ void place_kernel(const T* x, T* out, std::int64_t count, PlaceIndex index, T fill) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  std::int64_t linear = i;
  std::int64_t source = 0;
  bool inside = true;
  for (int axis = index.rank - 1; axis >= 0; --axis) {
    const std::int64_t coordinate = linear % index.out_extents[axis] - index.offset[axis];
    linear /= index.out_extents[axis];
    if (coordinate < 0 || coordinate >= index.x_extents[axis]) inside = false;
    source += coordinate * index.x_strides[axis];
  }
  out[i] = inside ? x[source] : fill;
}

void run_gather_index(DeviceContext& context, const Tensor& x, const Tensor& out, std::int64_t base,
                      const GatherIndex& index) {
  const std::int64_t count = out.numel();
  if (count == 0) return;
  visit_element_size(dtype_size(x.dtype()), [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), count, base, index);
  });
}

void run_transpose(const KernelContext& c) {
  DeviceContext& context = enter(c);
  permute(context, c.inputs[0], c.outputs[0], op_attrs<OpKind::transpose>(c.attrs).perm);
}

void run_slice(const KernelContext& c) {
  DeviceContext& context = enter(c);
  copy_window(context, c.inputs[0], c.outputs[0], op_attrs<OpKind::slice>(c.attrs).begin, true, 0);
}

void run_pad(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[0];
  const std::vector<std::int64_t> paddings = op_attrs<OpKind::pad>(c.attrs).paddings;
  std::vector<std::int64_t> before;
  for (int i = 0; i < x.rank(); ++i)
    before.push_back(paddings[2 * static_cast<std::size_t>(i)]);
  // The fill value as the raw bits of one element of x's dtype.
  std::uint64_t fill = 0;
  visit_dtype(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T value = convert_element<T>(op_attrs<OpKind::pad>(c.attrs).value);
    std::memcpy(&fill, &value, sizeof(T));
  });
  copy_window(context, x, c.outputs[0], before, false, fill);
}

void run_concat(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& out = c.outputs[0];
  const auto axis = static_cast<int>(op_attrs<OpKind::concat>(c.attrs).axis);
  std::int64_t outer = 1;
  for (int i = 0; i < axis; ++i)
    outer *= out.dim(i);
  const std::size_t element = dtype_size(out.dtype());
  const std::size_t out_row =
      static_cast<std::size_t>(out.numel() / std::max<std::int64_t>(outer, 1)) * element;
  std::size_t column = 0;
  for (const Tensor& x : c.inputs) {
    const std::size_t row = outer > 0 ? static_cast<std::size_t>(x.numel() / outer) * element : 0;
    if (row > 0 && outer > 0) {
      check(cudaMemcpy2DAsync(static_cast<char*>(out.raw_data()) + column, out_row, x.raw_data(),
                              row, row, static_cast<std::size_t>(outer), cudaMemcpyDeviceToDevice,
                              context.stream),
            "cudaMemcpy2DAsync");
    }
    column += row;
  }
}

// reshape's output is a view of its input (dispatch made it): nothing to move.
void run_reshape(const KernelContext&) {}

}  // namespace

void permute(DeviceContext& context, const Tensor& x, const Tensor& out,
             const std::vector<std::int64_t>& permutation) {
  require_rank("transpose", x.shape());
  const std::vector<std::int64_t> strides = contiguous_strides(x.shape());
  GatherIndex index;
  index.rank = x.rank();
  for (int axis = 0; axis < x.rank(); ++axis) {
    index.extents[axis] = out.dim(axis);
    index.strides[axis] =
        strides[static_cast<std::size_t>(permutation[static_cast<std::size_t>(axis)])];
  }
  if (index.rank == 0) {
    index.rank = 1;
    index.extents[0] = 1;
    index.strides[0] = 1;
  }
  run_gather_index(context, x, out, 0, index);
}

void copy_window(DeviceContext& context, const Tensor& x, const Tensor& out,
                 const std::vector<std::int64_t>& offset, bool extract, std::uint64_t fill) {
  require_rank(extract ? "slice" : "pad", x.shape());
  const std::vector<std::int64_t> strides = contiguous_strides(x.shape());
  if (extract) {
    GatherIndex index;
    index.rank = std::max(x.rank(), 1);
    index.extents[0] = 1;
    index.strides[0] = 1;
    std::int64_t base = 0;
    for (int axis = 0; axis < x.rank(); ++axis) {
      index.extents[axis] = out.dim(axis);
      index.strides[axis] = strides[static_cast<std::size_t>(axis)];
      base += offset[static_cast<std::size_t>(axis)] * strides[static_cast<std::size_t>(axis)];
    }
    run_gather_index(context, x, out, base, index);
    return;
  }
  const std::int64_t count = out.numel();
  if (count == 0) return;
  PlaceIndex index;
  index.rank = std::max(x.rank(), 1);
  index.out_extents[0] = 1;
  index.x_extents[0] = 1;
  for (int axis = 0; axis < x.rank(); ++axis) {
    index.out_extents[axis] = out.dim(axis);
    index.x_extents[axis] = x.dim(axis);
    index.x_strides[axis] = strides[static_cast<std::size_t>(axis)];
    index.offset[axis] = offset[static_cast<std::size_t>(axis)];
  }
  visit_element_size(dtype_size(x.dtype()), [&](auto tag) {
    using T = decltype(tag);
    T fill_value;
    std::memcpy(&fill_value, &fill, sizeof(T));
    place_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), count, index,
        fill_value);
  });
}

void register_layout_kernels(KernelTable& table) {
  const std::uint32_t every = every_dtype_mask();
  table.set(OpKind::reshape, run_reshape, every);
  table.set(OpKind::transpose, run_transpose, every);
  table.set(OpKind::concat, run_concat, every);
  table.set(OpKind::slice, run_slice, every);
  table.set(OpKind::pad, run_pad, every);
}

}  // namespace tandem::cuda
