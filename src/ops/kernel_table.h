#pragma once
// The kernel table every backend fills: per op, the kernel, the input dtypes it takes and, where
// its results may vary from run to run, why. Facts about a backend's kernels live here, beside
// the kernels, so the ops layer asks the backend instead of keeping lists of its own.
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "tandem/dtype.h"
#include "tandem/ops.h"

namespace tandem {

// Bit i set: inputs of DType i are supported.
constexpr std::uint32_t dtype_mask(std::initializer_list<DType> dtypes) {
  std::uint32_t mask = 0;
  for (DType dtype : dtypes)
    mask |= 1u << static_cast<unsigned>(dtype);
  return mask;
}
inline constexpr std::uint32_t kEveryDType = (1u << kNumDTypes) - 1;

// What a backend knows of one of its kernels.
struct KernelFacts {
  std::uint32_t dtypes = 0;
  // Why the kernel's results may differ between runs on the same inputs ("sums with atomics"),
  // nullptr when they never do. Deterministic mode refuses such kernels.
  const char* nondeterministic = nullptr;
};

// `Fn` is the backend's kernel type (a function pointer for the CPU and CUDA backends).
template <typename Fn>
class KernelTable {
 public:
  struct Entry {
    Fn run{};
    KernelFacts facts;
  };

  void set(OpKind kind, Fn run, std::uint32_t dtypes, const char* nondeterministic = nullptr) {
    entries_[index(kind)] = {run, {dtypes, nondeterministic}};
  }
  // What is known of the kernel for `kind`, nullptr when there is none.
  const KernelFacts* facts(OpKind kind) const {
    const Entry& entry = entries_[index(kind)];
    return entry.run ? &entry.facts : nullptr;
  }
  // The kernel for `kind`; call only where facts(kind) is not nullptr.
  const Fn& kernel(OpKind kind) const { return entries_[index(kind)].run; }

 private:
  static constexpr std::size_t index(OpKind kind) { return static_cast<std::size_t>(kind); }
  std::array<Entry, kNumOps> entries_{};
};

}  // namespace tandem
