#pragma once
// Process-wide runtime settings.
#include <string>

namespace tandem {

// Threads used by CPU kernels (oneDNN and Tandem's own loops); 0 = all hardware threads.
void set_num_threads(int threads);
int num_threads();

// Tandem's version, e.g. "0.1.0".
const char* version();
// oneDNN's version and the CPU instruction set it dispatches to, e.g. "oneDNN 2.6.3 (avx512_core_bf16)".
std::string cpu_backend_description();

}  // namespace tandem
