#include "backend/cpu/cpu_backend.h"

namespace tandem::cpu {

void register_norm_kernels(KernelTable&) {}

}  // namespace tandem::cpu
