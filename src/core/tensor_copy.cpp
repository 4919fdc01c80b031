#include "core/tensor_copy.h"

#include "core/allocator.h"

namespace tandem::detail {

void copy_into(const Tensor& dst, const Tensor& src, const std::string& what) {
  if (dst.shape() != src.shape() || dst.dtype() != src.dtype()) {
    throw InvalidArgument(what + ": expected a " + dtype_name(dst.dtype()) + " tensor of shape " +
                          shape_str(dst.shape()) + ", got " + dtype_name(src.dtype()) + " " +
                          shape_str(src.shape()) + "; cast or reshape it first");
  }
  if (dst.is_constant()) {
    throw InvalidArgument(what +
                          ": the target is a constant (an inference model's weight); make "
                          "the model again from the changed weights");
  }
  const Tensor local = src.to(dst.device());
  if (local.raw_data() == dst.raw_data()) return;
  device_memory(dst.device().type).copy_within(dst.raw_data(), local.raw_data(), dst.nbytes());
}

Tensor rows(const Tensor& x, std::int64_t start, std::int64_t count) {
  TANDEM_ASSERT(x.rank() >= 1 && start >= 0 && count >= 0 && start + count <= x.dim(0),
                "row range outside the tensor");
  Shape shape = x.shape();
  shape[0] = count;
  const std::int64_t row_elements = x.dim(0) > 0 ? x.numel() / x.dim(0) : 0;
  const std::size_t row_bytes = static_cast<std::size_t>(row_elements) * dtype_size(x.dtype());
  return Tensor::from_storage(x.storage(),
                              x.storage_offset() + static_cast<std::size_t>(start) * row_bytes,
                              shape, x.dtype());
}

}  // namespace tandem::detail
