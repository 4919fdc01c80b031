// The stand-in for the CUDA backend in builds where nvcc was not found: nothing comes up, and
// every question about CUDA gets the reason.
#include "core/allocator.h"
#include "tandem/cuda.h"

namespace tandem {
namespace {

constexpr const char* kNotBuilt =
    "this build of Tandem has no CUDA backend: nvcc was not found when it was built (install "
    "the CUDA toolkit with cuDNN and rebuild)";

}  // namespace

std::string bring_up_backend(DeviceType type) {
  return type == DeviceType::cuda ? kNotBuilt : "";
}

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

}  // namespace cuda
}  // namespace tandem
