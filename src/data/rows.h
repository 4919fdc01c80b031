#pragma once
// Rows of host tensors (slices along dimension 0), shared by TensorDataset and the pipeline's
// tensor sources.
#include <cstdint>

#include "tandem/tensor.h"

namespace tandem::data {

// Bytes in one row of `tensor` (all but dimension 0).
inline std::size_t row_bytes(const Tensor& tensor) {
  const Shape row_shape(tensor.shape().begin() + 1, tensor.shape().end());
  return static_cast<std::size_t>(shape_numel(row_shape)) * dtype_size(tensor.dtype());
}

// Rows [start, start + count) of `tensor`, sharing its storage.
inline Tensor row_view(const Tensor& tensor, std::int64_t start, std::int64_t count) {
  Shape shape = tensor.shape();
  shape[0] = count;
  return Tensor::from_storage(
      tensor.storage(),
      tensor.storage_offset() + static_cast<std::size_t>(start) * row_bytes(tensor), shape,
      tensor.dtype());
}

// Row `index` of `tensor` without the leading axis, sharing its storage.
inline Tensor row(const Tensor& tensor, std::int64_t index) {
  const Shape shape(tensor.shape().begin() + 1, tensor.shape().end());
  return Tensor::from_storage(
      tensor.storage(),
      tensor.storage_offset() + static_cast<std::size_t>(index) * row_bytes(tensor), shape,
      tensor.dtype());
}

}  // namespace tandem::data
