// The stand-in for the CUDA backend in builds where nvcc was not found: nothing comes up, and
// every question about CUDA gets the reason.
#include "ops/backend.h"
#include "tandem/cuda.h"

namespace tandem {
namespace {

constexpr const char* kNotBuilt =
    "this build of Tandem has no CUDA backend: nvcc was not found when it was built (install "
    "the CUDA toolkit with cuDNN and rebuild)";

const BackendRegistration registration(
    DeviceType::cuda,
    [](std::string& why_not) -> Backend* {
      why_not = kNotBuilt;
      return nullptr;
    },
    [](OpKind) -> const KernelFacts* { return nullptr; });

}  // namespace
}  // namespace tandem

// The linker keeps this file, and with it the registration, because CMake asks for this symbol.
extern "C" void tandem_link_cuda_backend() {}

namespace tandem {

namespace cuda {

const Status& status() {
  static const Status not_built{.built = false, .available = false, .reason = kNotBuilt};
  return not_built;
}

bool is_available() {
  return false;
}

void set_tf32_enabled(bool) {}
bool tf32_enabled() {
  return false;
}

void set_step_graphs_enabled(bool) {}
bool step_graphs_enabled() {
  return false;
}

}  // namespace cuda
}  // namespace tandem
