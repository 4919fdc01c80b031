#include "backend/cpu/cpu_backend.h"

namespace tandem::cpu {

void register_linalg_kernels(KernelTable&) {}

}  // namespace tandem::cpu
