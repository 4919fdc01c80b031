#pragma once
// Building blocks for the CPU backend's own loops: an OpenMP parallel-for that stays serial for
// small work (thread start-up costs more than it saves), and broadcast iteration.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "ops/kernel_geometry.h"
#include "tandem/tensor.h"

namespace tandem::cpu {

// The library is built for any x86-64 (SSE2), where the compiler cannot vectorise a loop that
// chooses between values; a hot loop marked with this is also compiled for AVX2 and AVX-512,
// and the loader picks the best the CPU has (GCC's and Clang's function multi-versioning). Mark
// a function that runs a whole loop, not one called per element: the choice is an indirect call.
#if defined(__x86_64__)
#define TANDEM_VECTOR_CLONES [[gnu::target_clones("avx512f", "avx2", "default")]]
#else
#define TANDEM_VECTOR_CLONES
#endif

// Below this many elements a loop runs on one thread.
inline constexpr std::int64_t kParallelGrain = 32768;

// {make.template operator()<1>(), ..., make.template operator()<Count>()}: the instances of a
// loop templated on a count it keeps in registers, indexed by count - 1, e.g.
// instances_by_count<16>([]<int Rows>() { return &panel_product<Rows>; }).
template <int Count, typename Make>
constexpr auto instances_by_count(Make make) {
  return [&]<int... Counts>(std::integer_sequence<int, Counts...>) {
    return std::array{make.template operator()<Counts + 1>()...};
  }
  (std::make_integer_sequence<int, Count>{});
}

// Calls body(begin, end) over [0, count) split across threads.
template <typename Body>
void parallel_for(std::int64_t count, std::int64_t cost_per_item, Body&& body) {
  if (count <= 0) return;
  const std::int64_t work = count * (cost_per_item > 0 ? cost_per_item : 1);
  const int threads = omp_get_max_threads();
  if (work < kParallelGrain || threads == 1 || omp_in_parallel()) {
    body(std::int64_t{0}, count);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const std::int64_t thread_count = omp_get_num_threads();
    const std::int64_t thread = omp_get_thread_num();
    const std::int64_t begin = count * thread / thread_count;
    const std::int64_t end = count * (thread + 1) / thread_count;
    if (begin < end) body(begin, end);
  }
}

// Calls body(lane, begin, end) over [0, counts[lane]) of every lane, the lanes' elements taken
// as one range split evenly across the threads (a multi-tensor update: one parallel region for
// all its tensors, however small each is).
template <typename Body>
void parallel_for_lanes(const std::vector<std::int64_t>& counts, std::int64_t cost_per_item,
                        Body&& body) {
  std::int64_t total = 0;
  for (const std::int64_t count : counts)
    total += count;
  const auto run_range = [&](std::int64_t begin, std::int64_t end) {
    std::int64_t start = 0;  // of the lane in the whole range
    for (std::size_t lane = 0; lane < counts.size() && start < end; ++lane) {
      const std::int64_t stop = start + counts[lane];
      if (stop > begin) body(lane, std::max(begin, start) - start, std::min(end, stop) - start);
      start = stop;
    }
  };
  parallel_for(total, cost_per_item, run_range);
}

// Iterates an output of shape `out_shape` with up to three broadcast inputs, as rows of the
// innermost (coalesced) dimension: per row each input has a start offset and a stride of 0
// (broadcast) or 1 along the row.
template <int kInputs>
class BroadcastPlan {
 public:
  BroadcastPlan(const Shape& out_shape, const std::array<const Shape*, kInputs>& input_shapes) {
    CoalescedBroadcast<kInputs> coalesced = coalesce_broadcast<kInputs>(out_shape, input_shapes);
    extents_ = std::move(coalesced.extents);
    strides_ = std::move(coalesced.strides);
    row_length_ = extents_.back();
    for (int k = 0; k < kInputs; ++k)
      row_stride_[k] = strides_.back()[k] != 0 ? 1 : 0;
    // A coalesced inner stride other than 0/1 cannot happen for dense inputs.
    rows_ = 1;
    for (std::size_t i = 0; i + 1 < extents_.size(); ++i)
      rows_ *= extents_[i];
  }

  std::int64_t rows() const { return rows_; }
  std::int64_t row_length() const { return row_length_; }
  std::int64_t row_stride(int input) const { return row_stride_[input]; }

  // Start offset of each input for output row `row`.
  std::array<std::int64_t, kInputs> row_offsets(std::int64_t row) const {
    std::array<std::int64_t, kInputs> offsets{};
    for (std::size_t i = extents_.size() - 1; i-- > 0;) {
      const std::int64_t index = row % extents_[i];
      row /= extents_[i];
      for (int k = 0; k < kInputs; ++k)
        offsets[k] += index * strides_[i][k];
    }
    return offsets;
  }

 private:
  std::vector<std::int64_t> extents_;
  std::vector<std::array<std::int64_t, kInputs>> strides_;
  std::int64_t rows_ = 1;
  std::int64_t row_length_ = 1;
  std::array<std::int64_t, kInputs> row_stride_{};
};

}  // namespace tandem::cpu
