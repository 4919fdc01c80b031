#pragma once
// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11): element i of a draw is a
// pure function of (seed, offset + i), so results are reproducible whatever the thread count or
// device, and a generator's state is just two integers that a checkpoint can store.
#include <array>
#include <cstdint>

#include "tandem/tensor.h"

// The stream functions below compile for CUDA kernels too, so dropout masks match bit for bit.
#ifdef __CUDACC__
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem {

// One Philox-4x32-10 block: 128 random bits from a 128-bit counter and a 64-bit key.
TANDEM_HOST_DEVICE inline std::array<std::uint32_t, 4> philox4x32(std::uint64_t counter_low,
                                                                  std::uint64_t counter_high,
                                                                  std::uint64_t key) {
  std::uint32_t c0 = static_cast<std::uint32_t>(counter_low);
  std::uint32_t c1 = static_cast<std::uint32_t>(counter_low >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(counter_high);
  std::uint32_t c3 = static_cast<std::uint32_t>(counter_high >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(key);
  std::uint32_t k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    const std::uint64_t product0 = std::uint64_t{0xD2511F53} * c0;
    const std::uint64_t product1 = std::uint64_t{0xCD9E8D57} * c2;
    const std::uint32_t next0 = static_cast<std::uint32_t>(product1 >> 32) ^ c1 ^ k0;
    const std::uint32_t next2 = static_cast<std::uint32_t>(product0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(product1);
    c3 = static_cast<std::uint32_t>(product0);
    c0 = next0;
    c2 = next2;
    k0 += 0x9E3779B9;
    k1 += 0xBB67AE85;
  }
  return {c0, c1, c2, c3};
}

// Uniform float in [0, 1) from 24 random bits.
TANDEM_HOST_DEVICE inline float uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

// The 32-bit random word number `index` of the stream (seed, offset).
TANDEM_HOST_DEVICE inline std::uint32_t philox_word(std::uint64_t seed, std::uint64_t offset,
                                                    std::uint64_t index) {
  const std::uint64_t position = offset + index;
  return philox4x32(position / 4, 0, seed)[position % 4];
}

// A stream of random numbers: a seed and how many numbers have been drawn so far.
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : seed_(seed) {}
  std::uint64_t seed() const { return seed_; }
  std::uint64_t offset() const { return offset_; }
  void set_state(std::uint64_t seed, std::uint64_t offset) {
    seed_ = seed;
    offset_ = offset;
  }
  // Reserves `count` words (rounded up to whole Philox blocks) and returns where they start.
  std::uint64_t reserve(std::uint64_t count) {
    const std::uint64_t start = offset_;
    offset_ += (count + 3) / 4 * 4;
    return start;
  }
  // Derives an independent seed, e.g. one per layer or per data-loader epoch.
  std::uint64_t next_seed() {
    const std::uint64_t start = reserve(2);
    return (std::uint64_t{philox_word(seed_, start, 0)} << 32) | philox_word(seed_, start, 1);
  }

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

// The process-wide generator that layers draw their initial weights from.
Generator& default_generator();
// Reseeds the default generator (like tf.random.set_seed).
void manual_seed(std::uint64_t seed);

// Random tensors, generated on the host and copied to `device`.
Tensor random_uniform(const Shape& shape, double low, double high, DType dtype = DType::f32,
                      Generator& generator = default_generator(), Device device = Device::cpu());
Tensor random_normal(const Shape& shape, double mean, double stddev, DType dtype = DType::f32,
                     Generator& generator = default_generator(), Device device = Device::cpu());
// Normal draws redrawn until within two standard deviations (like tf.random.truncated_normal).
Tensor truncated_normal(const Shape& shape, double mean, double stddev, DType dtype = DType::f32,
                        Generator& generator = default_generator(), Device device = Device::cpu());

}  // namespace tandem
