// A stand-in PJRT plugin for the discovery tests: like libtpu.so, it exports GetPjrtApi, which
// returns a PJRT_Api whose first fields give the PJRT C API version (here 0.54).
#include <cstddef>

namespace {

struct PjrtApiVersion {
  std::size_t struct_size;
  void* extension_start;
  int major_version;
  int minor_version;
};

struct PjrtApi {
  std::size_t struct_size;
  void* extension_start;
  PjrtApiVersion pjrt_api_version;
};

const PjrtApi api{sizeof(PjrtApi), nullptr, {sizeof(PjrtApiVersion), nullptr, 0, 54}};

}  // namespace

extern "C" __attribute__((visibility("default"))) const PjrtApi* GetPjrtApi() {
  return &api;
}
