// The stand-in for the XLA backend in builds made without the PJRT C API header: no client can
// be made, and every question gets the reason.
#include "ops/backend.h"
#include "tandem/xla.h"

namespace tandem::xla {
namespace {

constexpr const char* kNotBuilt =
    "this build of Tandem has no XLA backend: the PJRT C API header was not found when it was "
    "built (run scripts/fetch-pjrt.sh, which `make` runs, and rebuild)";

[[noreturn]] void not_built() {
  throw PjrtError(kNotBuilt);
}

const BackendRegistration registration(
    DeviceType::xla,
    [](std::string& why_not) -> Backend* {
      why_not = kNotBuilt;
      return nullptr;
    },
    [](OpKind) -> const KernelFacts* { return nullptr; });

}  // namespace

std::int64_t compile_for_topology(const std::string&, const std::string&, const std::string&,
                                  const CompileOptions&) {
  not_built();
}

void set_device_plugin(const std::string&) {}

std::string device_description(int) {
  not_built();
}

EagerStats eager_stats() {
  return {};
}

const BuildInfo& build_info() {
  static const BuildInfo info{false, 0, 0, kNotBuilt};
  return info;
}

std::string serialize_compile_options(const CompileOptions&) {
  not_built();
}

// Nothing below runs: no Client can be made, so no Buffer or Executable exists.
Client::Client(const std::string&, const std::vector<Option>&) {
  not_built();
}
Client::~Client() = default;
const PluginInfo& Client::plugin() const {
  not_built();
}
const std::string& Client::platform() const {
  not_built();
}
const std::string& Client::platform_version() const {
  not_built();
}
const std::vector<DeviceInfo>& Client::devices() const {
  not_built();
}
Executable Client::compile(const std::string&, const CompileOptions&) const {
  not_built();
}
Buffer Client::to_device(const Tensor&, int) const {
  not_built();
}
Tensor Buffer::to_host() const {
  not_built();
}
void Buffer::copy_to_host(const Tensor&) const {
  not_built();
}
const Shape& Buffer::shape() const {
  not_built();
}
DType Buffer::dtype() const {
  not_built();
}
int Buffer::device() const {
  not_built();
}
std::size_t Executable::num_outputs() const {
  not_built();
}
std::vector<Buffer> Executable::execute(const std::vector<const Buffer*>&) const {
  not_built();
}
std::vector<std::vector<Buffer>> Executable::execute_replicas(
    const std::vector<std::vector<const Buffer*>>&) const {
  not_built();
}

}  // namespace tandem::xla

// The linker keeps this file, and with it the registration, because CMake asks for this symbol.
extern "C" void tandem_link_xla_backend() {}
