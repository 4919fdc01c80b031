#include "backend/cpu/strided_copy.h"

#include <cstring>

#include "backend/cpu/loops.h"

namespace tandem::cpu {

std::vector<std::int64_t> dense_strides(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

namespace {

template <typename Word>
void copy_rows(Word* dst, const std::vector<std::int64_t>& dst_strides, const Word* src,
               const std::vector<std::int64_t>& src_strides, const Shape& shape) {
  const std::size_t rank = shape.size();
  const std::int64_t length = shape[rank - 1];
  const std::int64_t dst_step = dst_strides[rank - 1];
  const std::int64_t src_step = src_strides[rank - 1];
  std::int64_t rows = 1;
  for (std::size_t i = 0; i + 1 < rank; ++i)
    rows *= shape[i];
  parallel_for(rows, length, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t row = begin; row < end; ++row) {
      std::int64_t dst_offset = 0;
      std::int64_t src_offset = 0;
      std::int64_t remainder = row;
      for (std::size_t i = rank - 1; i-- > 0;) {
        const std::int64_t index = remainder % shape[i];
        remainder /= shape[i];
        dst_offset += index * dst_strides[i];
        src_offset += index * src_strides[i];
      }
      Word* out = dst + dst_offset;
      const Word* in = src + src_offset;
      if (dst_step == 1 && src_step == 1) {
        std::memcpy(out, in, static_cast<std::size_t>(length) * sizeof(Word));
      } else {
        for (std::int64_t i = 0; i < length; ++i)
          out[i * dst_step] = in[i * src_step];
      }
    }
  });
}

}  // namespace

void strided_copy(void* dst, const std::vector<std::int64_t>& dst_strides, const void* src,
                  const std::vector<std::int64_t>& src_strides, const Shape& shape,
                  std::size_t element_size) {
  if (shape_numel(shape) == 0) return;
  // Drop unit axes and merge axes that are contiguous in both buffers, so rows get long.
  Shape merged_shape;
  std::vector<std::int64_t> merged_dst;
  std::vector<std::int64_t> merged_src;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!merged_shape.empty() && merged_dst.back() == dst_strides[i] * shape[i] &&
        merged_src.back() == src_strides[i] * shape[i]) {
      merged_shape.back() *= shape[i];
      merged_dst.back() = dst_strides[i];
      merged_src.back() = src_strides[i];
      continue;
    }
    merged_shape.push_back(shape[i]);
    merged_dst.push_back(dst_strides[i]);
    merged_src.push_back(src_strides[i]);
  }
  if (merged_shape.empty()) {
    merged_shape = {1};
    merged_dst = {1};
    merged_src = {1};
  }
  switch (element_size) {
    case 1:
      return copy_rows(static_cast<std::uint8_t*>(dst), merged_dst,
                       static_cast<const std::uint8_t*>(src), merged_src, merged_shape);
    case 2:
      return copy_rows(static_cast<std::uint16_t*>(dst), merged_dst,
                       static_cast<const std::uint16_t*>(src), merged_src, merged_shape);
    case 4:
      return copy_rows(static_cast<std::uint32_t*>(dst), merged_dst,
                       static_cast<const std::uint32_t*>(src), merged_src, merged_shape);
    case 8:
      return copy_rows(static_cast<std::uint64_t*>(dst), merged_dst,
                       static_cast<const std::uint64_t*>(src), merged_src, merged_shape);
    default:
      TANDEM_ASSERT(false, "unsupported element size " + std::to_string(element_size));
  }
}

Tensor zero_padded(const Tensor& source, const Shape& shape,
                   const std::vector<std::int64_t>& source_strides, const Shape& padded_shape) {
  Tensor padded = Tensor::zeros(padded_shape, source.dtype(), Device::cpu());
  strided_copy(padded.raw_data(), dense_strides(padded_shape), source.raw_data(), source_strides,
               shape, dtype_size(source.dtype()));
  return padded;
}

void copy_leading_columns(const Tensor& padded, const Tensor& out) {
  const std::int64_t n = out.shape().back();
  const std::int64_t columns = padded.shape().back();
  strided_copy(out.raw_data(), {n, 1}, padded.raw_data(), {columns, 1}, {out.numel() / n, n},
               dtype_size(out.dtype()));
}

}  // namespace tandem::cpu
