// NCCL collectives on GPU tensors, for MultiWorker (one communicator across the worker processes,
// bootstrapped over MPI) and Mirrored (one communicator per GPU of the process). NCCL is loaded
// at run time, so the binary runs where it is missing; nccl.h supplies the types and checks the
// signatures at compile time. Collectives run on a stream of their own: a bucket starts once the
// backend has finished the kernels that produced it, and the backward pass goes on meanwhile.
#include <memory>
#include <string>

#include "distribute/collective.h"
#include "tandem/distribute.h"

#if defined(TANDEM_HAVE_CUDA) && __has_include(<nccl.h>)
#define TANDEM_HAVE_NCCL 1
#include <cuda_runtime.h>
#include <nccl.h>

#include "distribute/dynamic_library.h"
#include "distribute/mpi_world.h"
#include "ops/backend.h"
#endif

namespace tandem::distribute::detail {

#ifdef TANDEM_HAVE_NCCL
namespace {

#define TANDEM_NCCL_FUNCTIONS(X) \
  X(ncclGetVersion)              \
  X(ncclGetUniqueId)             \
  X(ncclCommInitRankConfig)      \
  X(ncclCommInitAll)             \
  X(ncclCommGetAsyncError)       \
  X(ncclCommAbort)               \
  X(ncclCommDestroy)             \
  X(ncclGetErrorString)          \
  X(ncclAllReduce)               \
  X(ncclBroadcast)               \
  X(ncclGroupStart)              \
  X(ncclGroupEnd)

#define TANDEM_NCCL_DECLARE(name) decltype(&::name) name = nullptr;

struct NcclLibrary {
  TANDEM_NCCL_FUNCTIONS(TANDEM_NCCL_DECLARE)
  DynamicLibrary handle;
  std::string version;
};

// Resolves every function; returns the first one missing, or "".
std::string resolve(NcclLibrary& library) {
  std::string missing;
#define TANDEM_NCCL_RESOLVE(name)                                   \
  library.name = library.handle.function<decltype(&::name)>(#name); \
  if (library.name == nullptr && missing.empty()) missing = #name;
  TANDEM_NCCL_FUNCTIONS(TANDEM_NCCL_RESOLVE)
#undef TANDEM_NCCL_RESOLVE
  return missing;
}

// The process's NCCL (TANDEM_NCCL_LIBRARY or libnccl.so.2); throws DeviceUnavailable saying why
// it cannot be loaded.
const NcclLibrary& nccl() {
  static std::string failure;
  static const std::unique_ptr<NcclLibrary> loaded = [] {
    auto library = std::make_unique<NcclLibrary>();
    std::string error;
    library->handle =
        DynamicLibrary::open_first(DiscoveryOptions::from_environment().nccl_libraries, error);
    if (!library->handle.loaded()) {
      failure = "NCCL cannot be loaded (" + error + "); install NCCL or set TANDEM_NCCL_LIBRARY";
      return std::unique_ptr<NcclLibrary>();
    }
    if (const std::string missing = resolve(*library); !missing.empty()) {
      failure = library->handle.path() + " has no " + missing + " (NCCL 2.14 or newer is needed)";
      return std::unique_ptr<NcclLibrary>();
    }
    int code = 0;
    library->ncclGetVersion(&code);
    library->version = std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) +
                       "." + std::to_string(code % 100);
    return library;
  }();
  if (!loaded) throw DeviceUnavailable(failure);
  return *loaded;
}

void check(ncclResult_t result, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  throw Error(std::string(call) + " failed: " + nccl().ncclGetErrorString(result));
}

void check(cudaError_t result, const char* call) {
  if (result != cudaSuccess) {
    throw Error(std::string(call) + " failed: " + cudaGetErrorString(result));
  }
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::f16:
      return ncclFloat16;
    case DType::bf16:
      return ncclBfloat16;
    default:
      throw InvalidArgument(std::string("NCCL all-reduces floating-point gradients, not ") +
                            dtype_name(dtype));
  }
}

// Waits until every kernel the backend queued on `device` has run, so a collective on another
// stream reads finished gradients.
void finish_backend_work(Device device) {
  backend_for(device).synchronize();
}

// ---- MultiWorker: one communicator across processes ----

class NcclCollective final : public Collective {
 public:
  NcclCollective(MpiWorld& world, Device device, double timeout_seconds)
      : world_(world), device_(device), timeout_seconds_(timeout_seconds) {
    const NcclLibrary& library = nccl();
    check(cudaSetDevice(device.index), "cudaSetDevice");
    ncclUniqueId id{};
    if (world.rank() == 0) check(library.ncclGetUniqueId(&id), "ncclGetUniqueId");
    world.broadcast(&id, sizeof id, timeout_seconds, "the broadcast of NCCL's unique id");
    // A non-blocking communicator: its start-up is polled with the same deadline and roll call
    // as MPI's waits, so a worker that never arrives cannot hang the others inside NCCL.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    check(library.ncclCommInitRankConfig(&communicator_, world.size(), id, world.rank(), &config),
          "ncclCommInitRankConfig");
    world.wait([this] { return communicator_ready(); }, timeout_seconds,
               "NCCL's start-up on every worker");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }

  ~NcclCollective() override {
    // After a failure collectives may wait for a worker that is gone: abort them instead.
    if (world_.broken()) {
      nccl().ncclCommAbort(communicator_);
    } else {
      nccl().ncclCommDestroy(communicator_);
    }
    cudaStreamDestroy(stream_);
  }

  std::function<bool()> start_all_reduce(const Tensor& flat) override {
    finish_backend_work(device_);
    const NcclLibrary& library = nccl();
    check(library.ncclAllReduce(flat.raw_data(), flat.raw_data(),
                                static_cast<std::size_t>(flat.numel()), nccl_type(flat.dtype()),
                                ncclSum, communicator_, stream_),
          "ncclAllReduce");
    // A non-blocking communicator may still be enqueuing the collective (ncclInProgress): the
    // event that marks its end goes on the stream once it is there.
    world_.wait([this] { return communicator_ready(); }, timeout_seconds_,
                "NCCL enqueuing a gradient all-reduce");
    cudaEvent_t done = nullptr;
    check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaEventRecord(done, stream_), "cudaEventRecord");
    auto event = std::shared_ptr<CUevent_st>(done, [](cudaEvent_t e) { cudaEventDestroy(e); });
    return [this, event, flat] {
      const cudaError_t state = cudaEventQuery(event.get());
      if (state == cudaSuccess) return true;
      if (state != cudaErrorNotReady) check(state, "ncclAllReduce (on the stream)");
      return communicator_ready();
    };
  }

  void progress() override {}
  std::string name() const override { return "NCCL " + nccl().version; }

 private:
  // False while NCCL is still working; throws on an asynchronous error.
  bool communicator_ready() {
    ncclResult_t state = ncclSuccess;
    check(nccl().ncclCommGetAsyncError(communicator_, &state), "ncclCommGetAsyncError");
    if (state == ncclInProgress) return false;
    check(state, "NCCL");
    return true;
  }

  MpiWorld& world_;
  Device device_;
  double timeout_seconds_;
  ncclComm_t communicator_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

// ---- Mirrored: one communicator per GPU of this process ----

class NcclGroup final : public ReplicaGroup {
 public:
  explicit NcclGroup(const std::vector<Device>& devices)
      : devices_(devices), communicators_(devices.size()), streams_(devices.size()) {
    std::vector<int> ordinals;
    for (const Device& device : devices)
      ordinals.push_back(device.index);
    check(nccl().ncclCommInitAll(communicators_.data(), static_cast<int>(ordinals.size()),
                                 ordinals.data()),
          "ncclCommInitAll");
    for (std::size_t k = 0; k < devices.size(); ++k) {
      check(cudaSetDevice(devices[k].index), "cudaSetDevice");
      check(cudaStreamCreateWithFlags(&streams_[k], cudaStreamNonBlocking), "cudaStreamCreate");
    }
  }

  ~NcclGroup() override {
    for (ncclComm_t communicator : communicators_) {
      if (communicator != nullptr) nccl().ncclCommDestroy(communicator);
    }
    for (cudaStream_t stream : streams_) {
      if (stream != nullptr) cudaStreamDestroy(stream);
    }
  }

  void all_reduce(const std::vector<Tensor>& flats) override {
    run(flats, [&](std::size_t k) {
      return nccl().ncclAllReduce(
          flats[k].raw_data(), flats[k].raw_data(), static_cast<std::size_t>(flats[k].numel()),
          nccl_type(flats[k].dtype()), ncclSum, communicators_[k], streams_[k]);
    });
  }

  void broadcast(const std::vector<Tensor>& flats) override {
    run(flats, [&](std::size_t k) {
      return nccl().ncclBroadcast(flats[k].raw_data(), flats[k].raw_data(),
                                  static_cast<std::size_t>(flats[k].numel()),
                                  nccl_type(flats[k].dtype()), 0, communicators_[k], streams_[k]);
    });
  }

  std::string name() const override { return "NCCL " + nccl().version; }

 private:
  // One call per GPU inside a group (NCCL then drives all of them from this thread), then waits.
  template <typename Call>
  void run(const std::vector<Tensor>& flats, Call call) {
    for (const Device& device : devices_)
      finish_backend_work(device);
    check(nccl().ncclGroupStart(), "ncclGroupStart");
    for (std::size_t k = 0; k < flats.size(); ++k)
      check(call(k), "NCCL collective");
    check(nccl().ncclGroupEnd(), "ncclGroupEnd");
    for (cudaStream_t stream : streams_)
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  std::vector<Device> devices_;
  std::vector<ncclComm_t> communicators_;
  std::vector<cudaStream_t> streams_;
};

}  // namespace

std::unique_ptr<Collective> make_nccl_collective(MpiWorld& world, Device device,
                                                 double timeout_seconds) {
  return std::make_unique<NcclCollective>(world, device, timeout_seconds);
}

std::unique_ptr<ReplicaGroup> make_nccl_group(const std::vector<Device>& devices) {
  return std::make_unique<NcclGroup>(devices);
}

#else

namespace {
constexpr const char* kNoNccl =
    "this build of Tandem has no NCCL collectives: they come with the CUDA backend, which needs "
    "nvcc, cuDNN's and NCCL's headers at build time";
}  // namespace

std::unique_ptr<Collective> make_nccl_collective(MpiWorld&, Device, double) {
  throw DeviceUnavailable(kNoNccl);
}

std::unique_ptr<ReplicaGroup> make_nccl_group(const std::vector<Device>&) {
  throw DeviceUnavailable(kNoNccl);
}

#endif

}  // namespace tandem::distribute::detail
