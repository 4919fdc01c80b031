#pragma once
// XLA through PJRT: a client of a PJRT plugin (XLA:CPU, XLA:GPU, Cloud TPU's libtpu), loaded at
// run time with dlopen and driven through the PJRT C API. StableHLO (MLIR text) goes in,
// executables come out and run on the plugin's devices, arrays move between Tandem tensors and
// device buffers. Every PJRT error becomes a PjrtError naming the plugin, the call and, for a
// compile error, the StableHLO line.
//
//   xla::Client client(xla::fetched_cpu_plugin(), {{"cpu_device_count", std::int64_t{2}}});
//   xla::Executable add = client.compile(module_text);
//   std::vector<xla::Buffer> out = add.execute({&client.to_device(a), &client.to_device(b)});
//   Tensor sum = out[0].to_host();
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "tandem/error.h"
#include "tandem/tensor.h"

namespace tandem::xla {

// A PJRT call that failed, or a plugin that cannot be used.
class PjrtError : public Error {
 public:
  using Error::Error;
};
// A PJRT call the device had no memory for (RESOURCE_EXHAUSTED): callers that know the sizes
// involved turn it into an OutOfMemory.
class PjrtOutOfMemory : public PjrtError {
 public:
  using PjrtError::PjrtError;
};

// Whether this build has the XLA backend (the PJRT C API header was there when it was built),
// the header's API version, and why not.
struct BuildInfo {
  bool built = false;
  int header_api_major = 0;
  int header_api_minor = 0;
  std::string reason;  // when not built
};
const BuildInfo& build_info();

// The XLA:CPU plugin scripts/fetch-pjrt.sh put beside the build, or "" when it is not there.
std::string fetched_cpu_plugin();

struct PluginInfo {
  std::string path;
  int api_major = 0;
  int api_minor = 0;
  // The plugin's attributes as text: xla_version, stablehlo_current_version, ...
  std::vector<std::pair<std::string, std::string>> attributes;
};

struct DeviceInfo {
  int id = 0;
  std::string kind;         // "cpu", "TPU v5 lite", "NVIDIA H100 80GB HBM3"
  std::string description;  // the plugin's debug string, e.g. "cpu:0"
};

// What XLA compiles a program for: replicas (data parallel copies) and the device of each.
struct CompileOptions {
  std::int64_t num_replicas = 1;
  std::int64_t num_partitions = 1;
  // The device id of each replica (size num_replicas); empty lets the plugin choose.
  std::vector<std::int64_t> replica_device_ids;
};
// The options as the bytes of an xla.CompileOptionsProto (never empty: empty options make XLA
// abort the process). Throws InvalidArgument for counts below 1 or a device list of the wrong
// length.
std::string serialize_compile_options(const CompileOptions& options);

// A platform as `tandem devices` shows it: its plugin loaded and asked for its devices, or why
// that failed.
struct PlatformStatus {
  bool usable = false;
  std::string reason;  // when not usable
  PluginInfo plugin;
  std::string platform;
  std::vector<DeviceInfo> devices;
};
// XLA:CPU through the fetched plugin.
PlatformStatus cpu_platform_status();

class Client;

// An array on one of a client's devices. Copies share it; it is freed with the last.
class Buffer {
 public:
  Tensor to_host() const;
  // Copies the array into `destination`, a CPU tensor of its shape and dtype (its storage is
  // written in place, so views and identities stay).
  void copy_to_host(const Tensor& destination) const;
  const Shape& shape() const;
  DType dtype() const;
  int device() const;  // the device's index in Client::devices()

  struct Impl;

 private:
  friend class Client;
  friend class Executable;
  explicit Buffer(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

// A compiled program, loaded on the client's devices.
class Executable {
 public:
  std::size_t num_outputs() const;
  // Runs on the one device the program was compiled for; the outputs stay on it.
  std::vector<Buffer> execute(const std::vector<const Buffer*>& arguments) const;
  // Runs every replica at once: one argument list per replica device, in the order of
  // CompileOptions::replica_device_ids; the outputs per replica.
  std::vector<std::vector<Buffer>> execute_replicas(
      const std::vector<std::vector<const Buffer*>>& arguments) const;

  struct Impl;

 private:
  friend class Client;
  explicit Executable(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<Impl> impl_;
};

class Client {
 public:
  // A client option of the plugin's, e.g. {"cpu_device_count", std::int64_t{4}} for XLA:CPU.
  using Option = std::pair<std::string, std::variant<std::int64_t, bool, std::string>>;

  // Loads the plugin at `plugin_path` (once per process: plugins are never unloaded), checks
  // its API version against the header Tandem was built with, initialises it and creates a
  // client. Throws PjrtError naming the path and the fix.
  explicit Client(const std::string& plugin_path, const std::vector<Option>& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  const PluginInfo& plugin() const;
  const std::string& platform() const;          // "cpu", "cuda", "tpu"
  const std::string& platform_version() const;  // as the plugin says it
  const std::vector<DeviceInfo>& devices() const;

  // Compiles StableHLO given as MLIR text. A program XLA rejects is a PjrtError with the
  // plugin's message and the line of `mlir` it points at.
  Executable compile(const std::string& mlir, const CompileOptions& options = {}) const;
  // Copies a CPU tensor to device `device` (an index into devices()).
  Buffer to_device(const Tensor& host, int device = 0) const;

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// Compiles `mlir` ahead of time for `topology` of the plugin's platform, without its devices
// (libtpu: "v5e:2x2", "v4:2x2x1"): whether a TPU takes a program, checked on any machine. Returns
// the size of the code generated. Throws PjrtError as Client::compile does. libtpu must be
// loaded only as tandem/distribute.h says (TPU_SKIP_MDS_QUERY=1, no network).
std::int64_t compile_for_topology(const std::string& plugin_path, const std::string& topology,
                                  const std::string& mlir, const CompileOptions& options = {});

// ---- Eager execution on XLA devices ----
// Tensors on Device::xla(i) live in buffers on device i of one PJRT client, and every op on them
// runs as an executable of its own: written by the op's lowering rule, compiled once per op,
// attributes, input and output types and device, then taken from a cache (as JAX runs a
// primitive outside jit). For debugging, and for custom loops outside a compiled step; a
// compiled step lowered whole (distribute::Xla, tandem train --strategy xla-cpu) is the fast
// path.
//
//   xla::set_device_plugin(plugin);  // optional: XLA:CPU's fetched plugin otherwise
//   Tensor x = Tensor::ones({2, 3}).to(Device::xla());
//   Tensor y = ops::relu(ops::matmul(x, w));  // two small executables, cached
//
// The plugin the xla devices come from; set it before the first tensor is placed on one (a
// different plugin after that is an InvalidArgument). Unset: TANDEM_XLA_DEVICE_PLUGIN, else the
// XLA:CPU plugin scripts/fetch-pjrt.sh fetched.
void set_device_plugin(const std::string& plugin_path);
// "xla:0 (XLA:cpu cpu:0)": the device, its platform and the plugin's name for it. Throws Error
// saying why where the xla devices cannot come up, or the device does not exist.
std::string device_description(int index);

// What eager execution has done in this process.
struct EagerStats {
  std::size_t compiled = 0;   // executables compiled (the cache's misses)
  std::size_t ops_run = 0;    // ops executed
  std::size_t uploads = 0;    // values copied to a device for an op
  std::size_t downloads = 0;  // values copied back for the host
};
EagerStats eager_stats();

}  // namespace tandem::xla
