#include "backend/cpu/cpu_backend.h"

namespace tandem::cpu {

void register_optimizer_kernels(KernelTable&) {}

}  // namespace tandem::cpu
