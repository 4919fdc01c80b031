// CPU all_reduce: a CPU kernel runs one replica, whose sum over itself is its input.
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "ops/op_attrs.h"

namespace tandem::cpu {
namespace {

void all_reduce_kernel(const KernelContext& c) {
  const std::int64_t replicas = op_attrs<OpKind::all_reduce>(c.attrs).replicas;
  if (replicas != 1) {
    throw InvalidArgument("all_reduce over " + std::to_string(replicas) +
                          " replicas cannot run on the CPU backend, which runs one replica; "
                          "compile the step for XLA (--strategy xla-cpu --replicas " +
                          std::to_string(replicas) + ")");
  }
  std::memcpy(c.outputs[0].raw_data(), c.inputs[0].raw_data(), c.inputs[0].nbytes());
}

}  // namespace

void register_collective_kernels(KernelTable& table) {
  table.set(OpKind::all_reduce, all_reduce_kernel, all_dtypes_mask());
}

}  // namespace tandem::cpu
