// CUDA gather and scatter-add over rows. gather copies elements (typed by size, any dtype);
// scatter-add accumulates with atomics, in float for bf16/f16 (into a scratch converted at the
// end), so repeated indices (the same token many times in a batch) do not lose precision. An
// index outside the table is reported like the CPU kernels do.
#include "backend/cuda/device_math.cuh"

namespace tandem::cuda {
namespace {

template <typename T, typename Index>
__global__ void gather_kernel(const T* table, const Index* indices, T* out, std::int64_t count,
                              std::int64_t rows, std::int64_t row_length, unsigned long long* bad) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count * row_length) return;
  const std::int64_t position = i / row_length;
  const auto row = static_cast<std::int64_t>(indices[position]);
  if (row < 0 || row >= rows) {
    atomicMin(bad, static_cast<unsigned long long>(position));
    return;
  }
  out[i] = table[row * row_length + i % row_length];
}

template <typename Acc, typename T, typename Index>
__global__ void scatter_add_kernel(const T* updates, const Index* indices, Acc* sums,
                                   std::int64_t count, std::int64_t rows, std::int64_t row_length,
                                   unsigned long long* bad) {
  const std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count * row_length) return;
  const std::int64_t position = i / row_length;
  const auto row = static_cast<std::int64_t>(indices[position]);
  if (row < 0 || row >= rows) {
    atomicMin(bad, static_cast<unsigned long long>(position));
    return;
  }
  Acc* target = sums + row * row_length + i % row_length;
  if constexpr (std::is_same_v<Acc, std::int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(target),
              static_cast<unsigned long long>(convert_to<std::int64_t>(updates[i])));
  } else {
    atomicAdd(target, convert_to<Acc>(load(updates, i)));
  }
}

template <typename Launch>
void with_index_type(DType dtype, Launch&& launch) {
  if (dtype == DType::i32) {
    launch(std::int32_t{});
  } else {
    launch(std::int64_t{});
  }
}

// The message for an index found bad after a recorded step ran, when its value is gone.
std::function<std::string(std::int64_t)> recorded_bad_index(const char* op, std::int64_t rows,
                                                            const Shape& table_shape) {
  return [op, rows, table_shape](std::int64_t position) {
    return std::string(op) + ": the index at position " + std::to_string(position) +
           " is outside [0, " + std::to_string(rows) + "), the rows of " + shape_str(table_shape) +
           " (found after the step ran as a CUDA graph; --jit off stops at the op with the "
           "value); check the ids against the table size (e.g. the vocabulary)";
  };
}

void report_bad_index(const char* op, const Tensor& indices, std::int64_t position,
                      std::int64_t rows, const Shape& table_shape) {
  std::int64_t index = 0;
  check(cudaMemcpy(&index,
                   static_cast<const char*>(indices.raw_data()) +
                       position * static_cast<std::int64_t>(dtype_size(indices.dtype())),
                   dtype_size(indices.dtype()), cudaMemcpyDeviceToHost),
        "cudaMemcpy");
  if (indices.dtype() == DType::i32) index = static_cast<std::int32_t>(index);
  throw InvalidArgument(std::string(op) + ": index " + std::to_string(index) + " at position " +
                        std::to_string(position) + " is outside [0, " + std::to_string(rows) +
                        "), the rows of " + shape_str(table_shape) +
                        "; check the ids against the table size (e.g. the vocabulary)");
}

void run_gather(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& table = c.inputs[0];
  const Tensor& indices = c.inputs[1];
  const std::int64_t rows = table.dim(0);
  const std::int64_t row_length = rows == 0 ? 0 : table.numel() / rows;
  const std::int64_t count = indices.numel();
  if (count == 0) return;
  BadValueCheck bad(context);
  if (row_length > 0) {
    visit_element_size(dtype_size(table.dtype()), [&](auto tag) {
      using T = decltype(tag);
      with_index_type(indices.dtype(), [&](auto index_tag) {
        using Index = decltype(index_tag);
        gather_kernel<T, Index><<<blocks_for(count * row_length), 256, 0, context.stream>>>(
            static_cast<const T*>(table.raw_data()), static_cast<const Index*>(indices.raw_data()),
            static_cast<T*>(c.outputs[0].raw_data()), count, rows, row_length, bad.slot());
      });
    });
  }
  check(cudaGetLastError(), "gather");
  if (const std::int64_t position = bad.first(recorded_bad_index("gather", rows, table.shape()));
      position >= 0) {
    report_bad_index("gather", indices, position, rows, table.shape());
  }
}

void run_scatter_add(const KernelContext& c) {
  DeviceContext& context = enter(c);
  const Tensor& updates = c.inputs[0];
  const Tensor& indices = c.inputs[1];
  const Tensor& out = c.outputs[0];
  const std::int64_t rows = out.dim(0);
  const std::int64_t row_length = rows == 0 ? 0 : out.numel() / rows;
  const std::int64_t count = indices.numel();
  check(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), context.stream), "cudaMemsetAsync");
  if (count == 0 || row_length == 0) {
    if (count > 0 && rows == 0) report_bad_index("scatter_add", indices, 0, rows, out.shape());
    return;
  }
  BadValueCheck bad(context);
  visit_numeric(updates.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // float for the floating dtypes; i32 adds natively; i64 through its unsigned twin.
    using Acc = std::conditional_t<is_floating_v<T>, float, T>;
    Tensor scratch;
    Acc* sums = static_cast<Acc*>(out.raw_data());
    if constexpr (!std::is_same_v<Acc, T>) {
      scratch = Tensor::empty(out.shape(), DType::f32, out.device());
      check(cudaMemsetAsync(scratch.raw_data(), 0, scratch.nbytes(), context.stream),
            "cudaMemsetAsync");
      sums = static_cast<Acc*>(scratch.raw_data());
    }
    with_index_type(indices.dtype(), [&](auto index_tag) {
      using Index = decltype(index_tag);
      scatter_add_kernel<Acc, T, Index><<<blocks_for(count * row_length), 256, 0, context.stream>>>(
          static_cast<const T*>(updates.raw_data()), static_cast<const Index*>(indices.raw_data()),
          sums, count, rows, row_length, bad.slot());
    });
    if (scratch.defined())
      convert(context, sums, DType::f32, out.raw_data(), out.dtype(), out.numel());
  });
  check(cudaGetLastError(), "scatter_add");
  if (const std::int64_t position = bad.first(recorded_bad_index("scatter_add", rows, out.shape()));
      position >= 0) {
    report_bad_index("scatter_add", indices, position, rows, out.shape());
  }
}

// One thread: the slot keeps the smallest bad position over the replays since it was last read.
__global__ void keep_bad_position_kernel(const unsigned long long* bad, unsigned long long* slot) {
  if (*bad < *slot) *slot = *bad;
}

}  // namespace

void keep_bad_position(DeviceContext& context, unsigned long long* slot) {
  keep_bad_position_kernel<<<1, 1, 0, context.stream>>>(context.bad_position, slot);
  check(cudaGetLastError(), "a recorded label or index check");
}

void register_gather_kernels(KernelTable& table) {
  table.set(OpKind::gather, run_gather, every_dtype_mask());
  table.set(OpKind::scatter_add, run_scatter_add, numeric_mask(), kSumsWithAtomics);
}

}  // namespace tandem::cuda
