#pragma once
// Copies into existing tensors and zero-copy row views: how weights get new values in place
// (set_weights, restoring the best weights) without changing their identity, which optimizer
// slots and tapes key on, and how batches are cut from a tensor without copying.
#include <cstdint>
#include <string>

#include "tandem/tensor.h"

namespace tandem::detail {

// Copies src's elements into dst's storage. Shapes and dtypes must match (what names the caller
// and both shapes on mismatch); src is moved to dst's device first.
void copy_into(const Tensor& dst, const Tensor& src, const std::string& what);

// Rows [start, start + count) of x (N, ...), sharing x's storage.
Tensor rows(const Tensor& x, std::int64_t start, std::int64_t count);

}  // namespace tandem::detail
