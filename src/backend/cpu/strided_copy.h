#pragma once
// Strided N-d copies, the one mechanism behind transpose, slice, pad and concat: each is a copy
// between two dense buffers seen through different strides.
#include <cstdint>
#include <vector>

#include "tandem/tensor.h"

namespace tandem::cpu {

// Row-major strides (in elements) of a dense tensor of `shape`.
std::vector<std::int64_t> dense_strides(const Shape& shape);

// Copies `shape` elements of `element_size` bytes from src (read through src_strides) to dst
// (written through dst_strides); strides are in elements. Parallel for large copies.
void strided_copy(void* dst, const std::vector<std::int64_t>& dst_strides, const void* src,
                  const std::vector<std::int64_t>& src_strides, const Shape& shape,
                  std::size_t element_size);

// `source`'s elements of `shape`, read through `source_strides` (a transposed operand has its
// last two swapped), copied into the leading corner of a fresh zero-filled tensor of
// `padded_shape` (each extent at least shape's); and the first columns of such a padded
// (..., rows, columns) tensor copied into `out` (..., rows, n), of any rank with as many rows. For
// products computed on more rows and columns than asked for (onednn_matmul_extents).
Tensor zero_padded(const Tensor& source, const Shape& shape,
                   const std::vector<std::int64_t>& source_strides, const Shape& padded_shape);
void copy_leading_columns(const Tensor& padded, const Tensor& out);

}  // namespace tandem::cpu
