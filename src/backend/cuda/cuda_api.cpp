#include "backend/cuda/cuda_api.h"

#include <dlfcn.h>

#include <mutex>
#include <string>
#include <vector>

#include "tandem/error.h"

namespace tandem::cuda {
namespace {

CudnnLibrary cudnn_table;
CublasLtLibrary cublaslt_table;

// Opens the first of `names` the dynamic loader finds (LD_LIBRARY_PATH, the cache, RUNPATH);
// returns nullptr and appends the loader's complaints to `errors` when none loads.
void* open_first(const std::vector<std::string>& names, std::string& errors) {
  for (const std::string& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    const char* error = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(error ? error : name);
  }
  return nullptr;
}

// Fills every pointer of a table from `handle`; returns the first missing symbol, or "".
#define TANDEM_LOAD_FUNCTION(name)                                           \
  table.name = reinterpret_cast<decltype(table.name)>(dlsym(handle, #name)); \
  if (table.name == nullptr) return #name;

std::string load_cudnn(void* handle) {
  CudnnLibrary& table = cudnn_table;
  TANDEM_CUDNN_FUNCTIONS(TANDEM_LOAD_FUNCTION)
  return "";
}

std::string load_cublaslt(void* handle) {
  CublasLtLibrary& table = cublaslt_table;
  TANDEM_CUBLASLT_FUNCTIONS(TANDEM_LOAD_FUNCTION)
  return "";
}

#undef TANDEM_LOAD_FUNCTION

std::string load_once() {
  // cuDNN 9 (its legacy API is stable within the major version); cuBLASLt of the toolkit's
  // major version, whose enums and structs the headers Tandem was built with describe.
  std::string errors;
  void* cudnn_handle = open_first({"libcudnn.so.9", "libcudnn.so"}, errors);
  if (cudnn_handle == nullptr) {
    return "cuDNN 9 could not be loaded (" + errors +
           "); install it (e.g. pip install nvidia-cudnn-cu" +
           std::to_string(CUDART_VERSION / 1000) + ") and add its lib folder to LD_LIBRARY_PATH";
  }
  if (const std::string missing = load_cudnn(cudnn_handle); !missing.empty()) {
    return "the cuDNN found lacks " + missing + "; install cuDNN 9";
  }
  if (cudnn_table.cudnnGetVersion() / 10000 != CUDNN_MAJOR) {
    return "cuDNN " + std::to_string(cudnn_table.cudnnGetVersion()) + " was loaded but Tandem " +
           "was built for cuDNN " + std::to_string(CUDNN_MAJOR) + ".x";
  }
  errors.clear();
  const std::string cublaslt_name = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);
  void* cublaslt_handle = open_first({cublaslt_name, "libcublasLt.so"}, errors);
  if (cublaslt_handle == nullptr) {
    return "cuBLASLt could not be loaded (" + errors + "); install the CUDA " +
           std::to_string(CUBLAS_VER_MAJOR) + " libraries and add them to LD_LIBRARY_PATH";
  }
  if (const std::string missing = load_cublaslt(cublaslt_handle); !missing.empty()) {
    return "the cuBLASLt found lacks " + missing;
  }
  if (static_cast<int>(cublaslt_table.cublasLtGetVersion() / 10000) != CUBLAS_VER_MAJOR) {
    return "cuBLASLt " + std::to_string(cublaslt_table.cublasLtGetVersion()) +
           " was loaded but Tandem was built for cuBLASLt " + std::to_string(CUBLAS_VER_MAJOR) +
           ".x";
  }
  return "";
}

}  // namespace

std::string load_libraries() {
  static const std::string reason = load_once();
  return reason;
}

const CudnnLibrary& cudnn() {
  return cudnn_table;
}
const CublasLtLibrary& cublaslt() {
  return cublaslt_table;
}

void check(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  // A failed call leaves its error as the runtime's last one; cleared here, it is not blamed on
  // the next kernel launch (a fault inside a kernel stays: the context is broken then).
  cudaGetLastError();
  throw Error(std::string("CUDA: ") + call + " failed: " + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ")");
}

void check(cudnnStatus_t status, const char* call) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  throw Error(std::string("cuDNN: ") + call + " failed: " + cudnn().cudnnGetErrorString(status));
}

void check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(std::string("cuBLASLt: ") + call +
              " failed: " + cublaslt().cublasLtGetStatusString(status));
}

}  // namespace tandem::cuda
