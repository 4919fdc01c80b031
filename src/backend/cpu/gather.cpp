// CPU gather and scatter-add over rows. Both see their tensors as (index count, row length)
// matrices: gather copies whole rows (any dtype, it is a copy), scatter-add accumulates rows in
// the compute type (float for bf16/f16, so repeated indices do not round at every addition).
#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"

namespace tandem::cpu {
namespace {

// Throws InvalidArgument for the first index outside [0, rows), naming its position.
template <typename Index>
void check_indices(const char* op, const Index* indices, std::int64_t count, std::int64_t rows,
                   const Shape& table_shape) {
  for (std::int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<std::int64_t>(indices[i]);
    if (index < 0 || index >= rows) {
      throw InvalidArgument(std::string(op) + ": index " + std::to_string(index) + " at position " +
                            std::to_string(i) + " is outside [0, " + std::to_string(rows) +
                            "), the rows of " + shape_str(table_shape) +
                            "; check the ids against the table size (e.g. the vocabulary)");
    }
  }
}

template <typename Index>
void gather_rows(const KernelContext& c) {
  const Tensor& params = c.inputs[0];  // (V, ...)
  const Tensor& indices = c.inputs[1];
  const std::int64_t count = indices.numel();
  const std::int64_t rows = params.dim(0);
  const Index* index = static_cast<const Index*>(indices.raw_data());
  check_indices("gather", index, count, rows, params.shape());
  const std::size_t row_bytes = rows == 0 ? 0 : params.nbytes() / static_cast<std::size_t>(rows);
  const char* source = static_cast<const char*>(params.raw_data());
  char* out = static_cast<char*>(c.outputs[0].raw_data());
  parallel_for(count, static_cast<std::int64_t>(row_bytes),
               [&](std::int64_t begin, std::int64_t end) {
                 for (std::int64_t i = begin; i < end; ++i) {
                   std::memcpy(out + static_cast<std::size_t>(i) * row_bytes,
                               source + static_cast<std::size_t>(index[i]) * row_bytes, row_bytes);
                 }
               });
}

// Threads split the row's columns, so every thread owns its output elements and no two add to
// one. f32, f64 and i64 accumulate in the output itself; the other types in a scratch of the
// compute type (float for bf16/f16, i64 for narrow integers), converted once at the end, so
// repeated indices do not round at every addition.
template <typename T, typename Index>
void scatter_add_rows(const KernelContext& c) {
  using Acc = std::conditional_t<std::is_integral_v<T>, std::int64_t, compute_type_t<T>>;
  constexpr bool kInPlace = std::is_same_v<Acc, T>;
  const Tensor& updates = c.inputs[0];  // (indices..., ...)
  const Tensor& indices = c.inputs[1];
  const Tensor& out = c.outputs[0];  // (rows, ...)
  const std::int64_t count = indices.numel();
  const std::int64_t rows = out.dim(0);
  const std::int64_t row_length = rows == 0 ? 0 : out.numel() / rows;
  const Index* index = static_cast<const Index*>(indices.raw_data());
  check_indices("scatter_add", index, count, rows, out.shape());
  const T* source = static_cast<const T*>(updates.raw_data());
  T* target = static_cast<T*>(out.raw_data());
  parallel_for(row_length, rows + count, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t width = end - begin;
    std::vector<Acc> scratch(kInPlace ? 0 : static_cast<std::size_t>(rows * width));
    // Element (r, j) of this thread's columns: in the output, or in the (rows, width) scratch.
    Acc* sums = kInPlace ? reinterpret_cast<Acc*>(target) + begin : scratch.data();
    const std::int64_t stride = kInPlace ? row_length : width;
    if constexpr (kInPlace) {
      for (std::int64_t r = 0; r < rows; ++r)
        std::fill(sums + r * stride, sums + r * stride + width, Acc(0));
    }
    for (std::int64_t i = 0; i < count; ++i) {
      Acc* sum_row = sums + static_cast<std::int64_t>(index[i]) * stride;
      const T* update_row = source + i * row_length + begin;
      for (std::int64_t j = 0; j < width; ++j)
        sum_row[j] += static_cast<Acc>(static_cast<compute_type_t<T>>(update_row[j]));
    }
    if constexpr (!kInPlace) {
      for (std::int64_t r = 0; r < rows; ++r) {
        for (std::int64_t j = 0; j < width; ++j)
          target[r * row_length + begin + j] = convert_element<T>(sums[r * width + j]);
      }
    }
  });
}

void gather_kernel(const KernelContext& c) {
  if (c.inputs[1].dtype() == DType::i32) {
    gather_rows<std::int32_t>(c);
  } else {
    gather_rows<std::int64_t>(c);
  }
}

void scatter_add_kernel(const KernelContext& c) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      if (c.inputs[1].dtype() == DType::i32) {
        scatter_add_rows<T, std::int32_t>(c);
      } else {
        scatter_add_rows<T, std::int64_t>(c);
      }
    }
  });
}

}  // namespace

void register_gather_kernels(KernelTable& table) {
  table.set(OpKind::gather, gather_kernel, all_dtypes_mask());
  table.set(OpKind::scatter_add, scatter_add_kernel,
            all_dtypes_mask() & ~dtype_mask({DType::boolean}));
}

}  // namespace tandem::cpu
