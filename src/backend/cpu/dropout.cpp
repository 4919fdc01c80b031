// CPU dropout: the mask from Philox-4x32-10 blocks (one block gives the random words of four
// consecutive elements), then y = x * mask, in one pass.
#include <algorithm>
#include <array>
#include <cmath>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/loops.h"
#include "ops/op_attrs.h"
#include "tandem/random.h"

namespace tandem::cpu {
namespace {

// Random words of a slice are made this many blocks at a time, in a loop with independent
// iterations the compiler can vectorise, before the element loop consumes them.
constexpr std::uint64_t kBlocksPerBatch = 64;

// mask = kept where (word >> 8) >= threshold, else 0; y = x * mask. Restrict-qualified
// parameters and by-value constants let the compiler vectorise it.
template <typename T>
void apply_mask(const std::uint32_t* __restrict words, const T* __restrict x, T* __restrict y,
                T* __restrict mask, std::int64_t count, std::uint32_t threshold, T kept) {
  using C = compute_type_t<T>;
  for (std::int64_t k = 0; k < count; ++k) {
    const T m = (words[k] >> 8) >= threshold ? kept : T(0);
    mask[k] = m;
    y[k] = convert_element<T>(static_cast<C>(x[k]) * static_cast<C>(m));
  }
}

template <typename T>
void dropout_loops(const KernelContext& c) {
  const double rate = op_attrs<OpKind::dropout>(c.attrs).rate;
  const std::int64_t* philox = c.inputs[1].data<std::int64_t>();  // (2,) {seed, offset}
  const auto seed = static_cast<std::uint64_t>(philox[0]);
  const auto offset = static_cast<std::uint64_t>(philox[1]);
  // uniform_from_bits(word) = (word >> 8) / 2^24 >= rate exactly when the integer (word >> 8)
  // reaches ceil(rate 2^24) (rate 2^24 is exact in double): an integer test that vectorises.
  const auto threshold = static_cast<std::uint32_t>(std::ceil(rate * 16777216.0));
  // Exactly 1 when rate is 0, so y reproduces x bit for bit.
  const T kept = convert_element<T>(1.0 / (1.0 - rate));
  const T* x = static_cast<const T*>(c.inputs[0].raw_data());
  T* y = static_cast<T*>(c.outputs[0].raw_data());
  T* mask = static_cast<T*>(c.outputs[1].raw_data());
  parallel_for(c.inputs[0].numel(), 16, [&](std::int64_t begin, std::int64_t end) {
    std::array<std::uint32_t, 4 * kBlocksPerBatch> words;
    // Element i draws word (offset + i) of the stream: word w % 4 of block w / 4.
    const std::uint64_t last_word = offset + static_cast<std::uint64_t>(end);
    std::uint64_t word = offset + static_cast<std::uint64_t>(begin);
    while (word < last_word) {
      const std::uint64_t first_block = word / 4;
      const std::uint64_t blocks = std::min(kBlocksPerBatch, (last_word + 3) / 4 - first_block);
      for (std::uint64_t b = 0; b < blocks; ++b) {
        const std::array<std::uint32_t, 4> block = philox4x32(first_block + b, 0, seed);
        for (std::uint64_t lane = 0; lane < 4; ++lane)
          words[4 * b + lane] = block[lane];
      }
      const std::uint64_t batch_end = std::min(4 * (first_block + blocks), last_word);
      const std::size_t i = word - offset;
      apply_mask(words.data() + (word - 4 * first_block), x + i, y + i, mask + i,
                 static_cast<std::int64_t>(batch_end - word), threshold, kept);
      word = batch_end;
    }
  });
}

void dropout_kernel(const KernelContext& c) {
  visit_dtype(c.inputs[0].dtype(), [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<compute_type_t<T>>) dropout_loops<T>(c);
  });
}

}  // namespace

void register_dropout_kernels(KernelTable& table) {
  table.set(OpKind::dropout, dropout_kernel, floating_dtypes_mask());
}

}  // namespace tandem::cpu
