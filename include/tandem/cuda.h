#pragma once
// The CUDA backend's state: whether this build has it, whether this machine can use it (and why
// not), the libraries it loaded and the GPUs it found. The backend comes up on first use of a
// cuda device (a tensor, an op) or of status(); a machine without a driver or a GPU simply
// reports why, and everything keeps running on the CPU.
#include <cstddef>
#include <string>
#include <vector>

namespace tandem::cuda {

struct DeviceProperties {
  int index = 0;
  std::string name;  // "NVIDIA H200"
  int major = 0;     // compute capability, e.g. 9.0
  int minor = 0;
  std::size_t total_memory = 0;  // bytes
  int multiprocessors = 0;
};

struct Status {
  bool built = false;        // this build of Tandem has the CUDA backend (nvcc was found)
  bool available = false;    // a usable GPU was found and the backend is up
  std::string reason;        // why not, when not available
  int runtime_version = 0;   // CUDA runtime Tandem was built with, e.g. 13000
  int driver_version = 0;    // highest CUDA version the driver supports; 0 without a driver
  int cudnn_version = 0;     // e.g. 91900; 0 when not loaded
  int cublaslt_version = 0;  // e.g. 130100; 0 when not loaded
  std::vector<DeviceProperties> devices;
};

// Probes once: the driver through the CUDA runtime, then cuDNN and cuBLASLt (loaded at run time,
// so the binary starts without them); brings the backend up when everything is there.
const Status& status();
bool is_available();

// TF32 for f32 matmuls and convolutions (tensor cores at 10-bit mantissa precision, as
// TensorFlow does by default). On by default; off gives IEEE f32 products.
void set_tf32_enabled(bool enabled);
bool tf32_enabled();

// Compiled steps on a GPU recorded as one CUDA graph after their first run and replayed with one
// launch a step (no per-op host work). On by default (checked and measured on an H200:
// scripts/gpu-check.sh steps 2, 3e and 4, bench/RESULTS.md); the environment variable
// TANDEM_CUDA_GRAPHS=0 turns it off, and the compiled step then issues its nodes one by one.
void set_step_graphs_enabled(bool enabled);
bool step_graphs_enabled();

}  // namespace tandem::cuda
