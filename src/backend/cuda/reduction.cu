// CUDA reductions (sum, mean, max, argmax) and broadcast_to. A reduction over any set of axes
// becomes one over the middle of an (outer, length, inner) view: directly when the reduced axes
// are adjacent, after a permutation that moves them last otherwise. Long reductions are split
// across blocks into float partial sums and finished by a second pass, so a whole-tensor sum
// (a gradient norm) uses the whole GPU.
#include "backend/cuda/device_math.cuh"
#include "ops/op_attrs.h"

namespace tandem::cuda {
namespace {

template <typename T>
using accumulate_t = std::conditional_t<std::is_integral_v<compute_t<T>>, std::int64_t, float>;

template <typename Acc, Reduction kReduction>
using ReduceOp = std::conditional_t<kReduction == Reduction::sum, SumOp<Acc>, MaxOp<Acc>>;

// Rows (inner == 1): block (row, split) reduces its share of one row.
template <typename T, typename Acc, typename Op>
__global__ void reduce_rows_kernel(const T* x, Acc* partial, std::int64_t length,
                                   std::int64_t chunk) {
  const std::int64_t row = blockIdx.x;
  const std::int64_t begin = blockIdx.y * chunk;
  const std::int64_t end = begin + chunk < length ? begin + chunk : length;
  const T* line = x + row * length;
  Op op;
  Acc value = Op::identity();
  for (std::int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    value = op(value, convert_to<Acc>(load(line, i)));
  }
  value = block_reduce(value, op);
  if (threadIdx.x == 0) partial[row * gridDim.y + blockIdx.y] = value;
}

// Columns (inner > 1): 32 threads across the inner axis, 8 along the reduced one; block
// (outer x column tile, split) reduces its share of 32 columns.
template <typename T, typename Acc, typename Op>
__global__ void reduce_columns_kernel(const T* x, Acc* partial, std::int64_t length,
                                      std::int64_t inner, std::int64_t chunk,
                                      std::int64_t column_tiles) {
  __shared__ Acc tile[8][33];
  const std::int64_t outer = blockIdx.x / column_tiles;
  const std::int64_t column = (blockIdx.x % column_tiles) * 32 + threadIdx.x;
  const std::int64_t split = blockIdx.y;
  const std::int64_t begin = split * chunk;
  const std::int64_t end = begin + chunk < length ? begin + chunk : length;
  Op op;
  Acc value = Op::identity();
  if (column < inner) {
    const T* block = x + outer * length * inner;
    for (std::int64_t r = begin + threadIdx.y; r < end; r += 8) {
      value = op(value, convert_to<Acc>(load(block, r * inner + column)));
    }
  }
  tile[threadIdx.y][threadIdx.x] = value;
  __syncthreads();
  if (threadIdx.y == 0 && column < inner) {
    for (int k = 1; k < 8; ++k)
      value = op(value, tile[k][threadIdx.x]);
    partial[(outer * gridDim.y + split) * inner + column] = value;
  }
}

// Folds the splits of (outer, splits, inner) partials into (outer, inner) results.
template <typename Acc, typename Out, typename Op>
__global__ void finish_kernel(const Acc* partial, Out* out, std::int64_t splits, std::int64_t inner,
                              std::int64_t count, double scale) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const std::int64_t outer = i / inner;
  const std::int64_t column = i % inner;
  Op op;
  Acc value = Op::identity();
  for (std::int64_t s = 0; s < splits; ++s)
    value = op(value, partial[(outer * splits + s) * inner + column]);
  if (scale != 1.0) value = static_cast<Acc>(value * scale);
  out[i] = convert_to<Out>(value);
}

template <typename T, typename Out>
__global__ void argmax_kernel(const T* x, Out* out, std::int64_t length, std::int64_t inner,
                              std::int64_t count) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  const std::int64_t outer = i / inner;
  const std::int64_t column = i % inner;
  const T* line = x + outer * length * inner + column;
  compute_t<T> best = load(line, 0);
  std::int64_t best_index = 0;
  for (std::int64_t r = 1; r < length; ++r) {
    const compute_t<T> value = load(line, r * inner);
    if (value > best) {  // the first of tied maxima wins, as on the CPU
      best = value;
      best_index = r;
    }
  }
  out[i] = best_index;
}

template <typename T>
__global__ void broadcast_kernel(const T* x, T* out, std::int64_t count, BroadcastIndex<1> index) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count) return;
  std::int64_t offsets[1];
  index.offsets(i, offsets);
  out[i] = x[offsets[0]];
}

template <Reduction kReduction, typename T, typename Out>
void reduce_typed(DeviceContext& context, const T* x, Out* out, std::int64_t outer,
                  std::int64_t length, std::int64_t inner, double scale) {
  using Acc = accumulate_t<T>;
  using Op = ReduceOp<Acc, kReduction>;
  // Enough blocks to fill the GPU several times over, each reducing at least 2048 elements.
  const std::int64_t target_blocks =
      4LL * (context.multiprocessors > 0 ? context.multiprocessors : 80);
  const std::int64_t column_tiles = (inner + 31) / 32;
  const std::int64_t parallel = outer * column_tiles;
  std::int64_t splits = parallel >= target_blocks ? 1 : (target_blocks + parallel - 1) / parallel;
  splits = std::min<std::int64_t>(splits, std::max<std::int64_t>(1, length / 2048));
  splits = std::min<std::int64_t>(splits, 65535);
  const std::int64_t chunk = (length + splits - 1) / splits;
  Tensor partial = Tensor::empty({outer * splits * inner * static_cast<std::int64_t>(sizeof(Acc))},
                                 DType::u8, Device::cuda(context.index));
  Acc* partials = static_cast<Acc*>(partial.raw_data());
  if (inner == 1) {
    const unsigned threads = row_threads(chunk);
    reduce_rows_kernel<T, Acc, Op>
        <<<dim3(static_cast<unsigned>(outer), static_cast<unsigned>(splits)), threads, 0,
           context.stream>>>(x, partials, length, chunk);
  } else {
    reduce_columns_kernel<T, Acc, Op>
        <<<dim3(static_cast<unsigned>(outer * column_tiles), static_cast<unsigned>(splits)),
           dim3(32, 8), 0, context.stream>>>(x, partials, length, inner, chunk, column_tiles);
  }
  const std::int64_t count = outer * inner;
  finish_kernel<Acc, Out, Op>
      <<<blocks_for(count), 256, 0, context.stream>>>(partials, out, splits, inner, count, scale);
}

// The (outer, length, inner) view of a reduction over sorted `axes` when they are adjacent
// (axes of extent 1 do not matter); false when they are not.
bool middle_view(const Shape& shape, const std::vector<std::int64_t>& axes, std::int64_t& outer,
                 std::int64_t& length, std::int64_t& inner) {
  std::vector<bool> reduced(shape.size(), false);
  for (std::int64_t axis : axes)
    reduced[static_cast<std::size_t>(axis)] = true;
  int first = -1;
  int last = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (!reduced[i] || shape[i] == 1) continue;
    if (first < 0) first = static_cast<int>(i);
    last = static_cast<int>(i);
  }
  outer = 1;
  length = 1;
  inner = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const bool inside = first >= 0 && static_cast<int>(i) >= first && static_cast<int>(i) <= last;
    if (inside && !reduced[i] && shape[i] != 1) return false;
    if (inside) {
      length *= shape[i];
    } else if (first >= 0 && static_cast<int>(i) > last) {
      inner *= shape[i];
    } else {
      outer *= shape[i];
    }
  }
  return true;
}

template <Reduction kReduction>
void run_reduce(const KernelContext& c, bool mean) {
  DeviceContext& context = enter(c);
  const Tensor& out = c.outputs[0];
  if (out.numel() == 0) return;
  const Tensor& x = c.inputs[0];
  std::vector<std::int64_t> axes = read_attrs<ReduceAttrs>(c.attrs).axes;
  if (axes.empty()) {
    for (int i = 0; i < x.rank(); ++i)
      axes.push_back(i);
  }
  std::int64_t outer = 1;
  std::int64_t length = 1;
  std::int64_t inner = 1;
  Tensor source = x;
  if (!middle_view(x.shape(), axes, outer, length, inner)) {
    // Kept axes first, reduced axes last: one (outer, length) row per output element.
    std::vector<std::int64_t> permutation;
    std::vector<bool> reduced(static_cast<std::size_t>(x.rank()), false);
    for (std::int64_t axis : axes)
      reduced[static_cast<std::size_t>(axis)] = true;
    Shape permuted_shape;
    for (int pass = 0; pass < 2; ++pass) {
      for (int i = 0; i < x.rank(); ++i) {
        if (reduced[static_cast<std::size_t>(i)] == (pass == 1)) {
          permutation.push_back(i);
          permuted_shape.push_back(x.dim(i));
        }
      }
    }
    source = Tensor::empty(permuted_shape, x.dtype(), x.device());
    permute(context, x, source, permutation);
    outer = out.numel();
    length = x.numel() / outer;
    inner = 1;
  }
  const double scale = mean && length > 0 ? 1.0 / static_cast<double>(length) : 1.0;
  reduce_middle(context, source.raw_data(), x.dtype(), out.raw_data(), out.dtype(), outer, length,
                inner, kReduction, scale);
}

void run_sum(const KernelContext& c) {
  run_reduce<Reduction::sum>(c, false);
}
void run_mean(const KernelContext& c) {
  run_reduce<Reduction::sum>(c, true);
}
void run_max(const KernelContext& c) {
  run_reduce<Reduction::max>(c, false);
}

void run_argmax(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& x = c.inputs[0];
  const std::int64_t count = c.outputs[0].numel();
  if (count == 0) return;
  const auto axis = static_cast<int>(op_attrs<OpKind::argmax>(c.attrs).axis);
  std::int64_t inner = 1;
  for (int i = axis + 1; i < x.rank(); ++i)
    inner *= x.dim(i);
  const std::int64_t length = x.dim(axis);
  visit_numeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    argmax_kernel<T, std::int64_t><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const T*>(x.raw_data()), static_cast<std::int64_t*>(c.outputs[0].raw_data()),
        length, inner, count);
  });
}

void run_broadcast_to(const KernelContext& c) {
  DeviceContext& context = enter(c);
  broadcast_into(context, c.inputs[0], c.outputs[0]);
}

}  // namespace

void broadcast_into(DeviceContext& context, const Tensor& x, const Tensor& out) {
  const std::int64_t count = out.numel();
  if (count == 0) return;
  const BroadcastIndex<1> index = broadcast_index<1>(out.shape(), {&x.shape()});
  visit_element_size(dtype_size(out.dtype()), [&](auto tag) {
    using T = decltype(tag);
    broadcast_kernel<T><<<blocks_for(count), 256, 0, context.stream>>>(
        static_cast<const T*>(x.raw_data()), static_cast<T*>(out.raw_data()), count, index);
  });
}

void reduce_middle(DeviceContext& context, const void* x, DType x_dtype, void* out, DType out_dtype,
                   std::int64_t outer, std::int64_t length, std::int64_t inner, Reduction reduction,
                   double scale) {
  if (outer * inner == 0) return;
  visit_numeric(x_dtype, [&](auto x_tag) {
    using T = decltype(x_tag);
    visit_numeric(out_dtype, [&](auto out_tag) {
      using Out = decltype(out_tag);
      if constexpr (std::is_integral_v<T> == std::is_integral_v<Out>) {
        if (reduction == Reduction::sum) {
          reduce_typed<Reduction::sum>(context, static_cast<const T*>(x), static_cast<Out*>(out),
                                       outer, length, inner, scale);
        } else {
          reduce_typed<Reduction::max>(context, static_cast<const T*>(x), static_cast<Out*>(out),
                                       outer, length, inner, scale);
        }
      } else {
        TANDEM_ASSERT(false, "reductions between integer and floating dtypes are not supported");
      }
    });
  });
}

void register_reduction_kernels(KernelTable& table) {
  const std::uint32_t numeric = numeric_mask();
  table.set(OpKind::sum, run_sum, numeric);
  table.set(OpKind::mean, run_mean, floating_mask());
  table.set(OpKind::max, run_max, numeric);
  table.set(OpKind::argmax, run_argmax, numeric);
  table.set(OpKind::broadcast_to, run_broadcast_to, every_dtype_mask());
}

}  // namespace tandem::cuda
