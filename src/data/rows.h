#pragma once
// Rows of host tensors (slices along dimension 0), shared by TensorDataset and the pipeline's
// tensor sources.
#include <cstdint>
#include <cstring>
#include <span>

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

// Rows `indices` of `tensor`, in that order, copied into a new tensor (indices.size(), ...).
inline Tensor gather_rows(const Tensor& tensor, std::span<const std::int64_t> indices) {
  Shape shape = tensor.shape();
  shape[0] = static_cast<std::int64_t>(indices.size());
  Tensor stacked = Tensor::empty(shape, tensor.dtype());  // (indices.size(), ...)
  const std::size_t bytes = row_bytes(tensor);
  const auto* rows = static_cast<const std::uint8_t*>(tensor.raw_data());
  auto* out = static_cast<std::uint8_t*>(stacked.raw_data());
  for (std::size_t i = 0; i < indices.size(); ++i)
    std::memcpy(out + i * bytes, rows + static_cast<std::size_t>(indices[i]) * bytes, bytes);
  return stacked;
}

}  // namespace tandem::data
