#pragma once
// What a data file holds, from its first bytes: shared by `tandem data` and `tandem train --data`.
#include <string>

namespace tandem::cli {

enum class DataKind { idx, tfrecord, cifar10, image, unknown };

// JPEG/PNG by signature, IDX by its magic, TFRecord by the CRC of its first record's length,
// CIFAR-10 by a size that is a whole number of 3073-byte records (gzip-compressed files are
// looked at decompressed).
DataKind kind_of_file(const std::string& path);

}  // namespace tandem::cli
