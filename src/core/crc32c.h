#pragma once
// CRC-32C (Castagnoli), the checksum of TFRecord files, with TensorFlow's masking. Uses the
// SSE4.2 crc32 instruction where the CPU has it, else a slicing-by-8 table.
#include <cstdint>
#include <span>

namespace tandem {

std::uint32_t crc32c(std::span<const std::uint8_t> bytes, std::uint32_t crc = 0);

// TFRecord stores masked CRCs: a CRC of data that itself holds CRCs is then not degenerate.
inline std::uint32_t mask_crc(std::uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace tandem
