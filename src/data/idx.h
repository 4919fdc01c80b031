#pragma once
// IDX files with their layout, for the readers that report byte offsets.
#include <cstdint>
#include <string>

#include "tandem/tensor.h"

namespace tandem::data {

struct IdxContents {
  Tensor tensor;
  std::int64_t header_bytes = 0;   // magic number and dimensions
  std::int64_t element_width = 1;  // bytes per element in the file
};

// What the file is meant to hold, checked against its header before its data is read: labels
// have 1 dimension (N,), images at least 2 (N, rows, cols).
enum class IdxRole { any, images, labels };

// As read_idx, with where the elements start and how wide they are in the file.
IdxContents read_idx_contents(const std::string& path, IdxRole role = IdxRole::any);

}  // namespace tandem::data
