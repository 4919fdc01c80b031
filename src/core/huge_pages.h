#pragma once
// Tensors for large, long-lived data a kernel streams on every call, on transparent huge pages
// (cpu_huge_page_allocator in core/allocator.h).
#include "tandem/tensor.h"

namespace tandem {

// An uninitialised CPU tensor from cpu_huge_page_allocator: for an inference model's filters in
// the layout a kernel reads them (oneDNN's reordered copies, the streamed loops' panels), not for
// activations or data.
Tensor empty_on_huge_pages(const Shape& shape, DType dtype);

}  // namespace tandem
