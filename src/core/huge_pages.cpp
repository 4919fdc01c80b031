#include "core/huge_pages.h"

#include <memory>
#include <utility>

#include "core/allocator.h"

namespace tandem {

Tensor empty_on_huge_pages(const Shape& shape, DType dtype) {
  const std::size_t nbytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  Allocator& allocator = cpu_huge_page_allocator();
  auto storage =
      std::make_shared<Storage>(allocator.allocate(nbytes), nbytes, Device::cpu(), &allocator);
  return Tensor::from_storage(std::move(storage), 0, shape, dtype);
}

}  // namespace tandem
