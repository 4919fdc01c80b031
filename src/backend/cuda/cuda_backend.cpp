// The CUDA backend: bring-up (driver, GPUs, cuDNN, cuBLASLt), the Backend that dispatches to
// the kernel table, and the device memory: one stream-ordered pool per GPU (cudaMallocAsync on
// the GPU's stream, the pool keeping freed memory for the next step instead of returning it to
// the driver), with host-to-device copies staged through pinned buffers on a copy stream so they
// overlap the kernels already queued.
#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>

#include "core/allocator.h"
#include "tandem/cuda.h"

namespace tandem {
namespace cuda {

const KernelTable& kernels() {
  static const KernelTable table = [] {
    KernelTable filled;
    register_elementwise_kernels(filled);
    register_reduction_kernels(filled);
    register_layout_kernels(filled);
    register_softmax_kernels(filled);
    register_dropout_kernels(filled);
    register_quantize_kernels(filled);
    register_optimizer_kernels(filled);
    register_gather_kernels(filled);
    register_layer_norm_kernels(filled);
    register_pool_kernels(filled);
    register_matmul_kernels(filled);
    register_conv_kernels(filled);
    register_norm_kernels(filled);
    return filled;
  }();
  return table;
}

namespace {

std::atomic<bool> tf32{true};
std::atomic<bool> step_graphs{[] {
  const char* value = std::getenv("TANDEM_CUDA_GRAPHS");
  return value == nullptr || std::string(value) != "0";
}()};

// Host-to-device copies of at least this size go through the pinned staging buffers; smaller
// ones are not worth the extra hop.
constexpr std::size_t kStagingThreshold = 64 * 1024;
constexpr std::size_t kStagingBufferBytes = 8 * 1024 * 1024;
constexpr int kStagingBuffers = 4;
// Label and index checks that the recorded graphs of one GPU can hold together.
constexpr int kRecordedCheckSlots = 256;

class CudaRecordedWork;

// One GPU: its context, memory ledger, and the pinned buffers and copy stream that stage
// host-to-device copies.
class Gpu final : public Allocator {
 public:
  explicit Gpu(int index) : ledger_(Device::cuda(index)) { context_.index = index; }

  void start(std::size_t total_memory, int multiprocessors) {
    check(cudaSetDevice(context_.index), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&context_.stream, cudaStreamNonBlocking), "cudaStreamCreate");
    check(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Keep what the pool holds across synchronisations: a training step reuses the memory the
    // last one freed instead of asking the driver again.
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, context_.index), "cudaDeviceGetDefaultMemPool");
    std::uint64_t keep_everything = ~std::uint64_t{0};
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_everything),
          "cudaMemPoolSetAttribute");
    check(cudnn().cudnnCreate(&context_.cudnn), "cudnnCreate");
    check(cudnn().cudnnSetStream(context_.cudnn, context_.stream), "cudnnSetStream");
    check(cublaslt().cublasLtCreate(&context_.cublaslt), "cublasLtCreate");
    check(cudaMalloc(&context_.bad_position, sizeof(unsigned long long)), "cudaMalloc");
    check(cudaMallocHost(&context_.bad_position_host, sizeof(unsigned long long)),
          "cudaMallocHost");
    check(
        cudaMallocHost(&context_.recorded_slots, kRecordedCheckSlots * sizeof(unsigned long long)),
        "cudaMallocHost");
    check(cudaHostGetDevicePointer(reinterpret_cast<void**>(&context_.recorded_slots_on_device),
                                   context_.recorded_slots, 0),
          "cudaHostGetDevicePointer");
    for (int slot = kRecordedCheckSlots - 1; slot >= 0; --slot) {
      context_.recorded_slots[slot] = ~0ull;
      context_.free_recorded_slots.push_back(slot);
    }
    for (int i = 0; i < kStagingBuffers; ++i) {
      Staging staging;
      check(cudaMallocHost(&staging.host, kStagingBufferBytes), "cudaMallocHost");
      check(cudaEventCreateWithFlags(&staging.copied, cudaEventDisableTiming), "cudaEventCreate");
      staging_.push_back(staging);
    }
    check(cudaEventCreateWithFlags(&allocated_, cudaEventDisableTiming), "cudaEventCreate");
    context_.multiprocessors = multiprocessors;
    ledger_.set_capacity(total_memory);
  }

  DeviceContext& context() { return context_; }
  MemoryLedger& ledger() { return ledger_; }

  void* allocate(std::size_t nbytes) override {
    const std::size_t size = nbytes == 0 ? 256 : nbytes;
    ledger_.reserve(size);
    check(cudaSetDevice(context_.index), "cudaSetDevice");
    void* data = nullptr;
    cudaError_t status = cudaMallocAsync(&data, size, context_.stream);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear the sticky-free error state of the call
      release_cached_memory();
      status = cudaMallocAsync(&data, size, context_.stream);
    }
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ledger_.release(size);
      std::size_t free_bytes = 0;
      std::size_t total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      ledger_.refuse(nbytes, format_memory_size(free_bytes) + " of the " +
                                 format_memory_size(total_bytes) + " GPU free");
    }
    if (status != cudaSuccess) ledger_.release(size);
    check(status, "cudaMallocAsync");
    return data;
  }

  void deallocate(void* data, std::size_t nbytes) override {
    // A destructor must not throw: a failure here means the context is already broken, and the
    // next launch reports it.
    cudaSetDevice(context_.index);
    cudaFreeAsync(data, context_.stream);
    ledger_.release(nbytes == 0 ? 256 : nbytes);
  }

  // Large copies: the host data goes into a pinned buffer (a memcpy on this thread) and from
  // there to the GPU on the copy stream, ordered after the destination's allocation on the
  // compute stream and before anything the compute stream runs next.
  void copy_from_host(void* dst, const void* src, std::size_t nbytes) {
    check(cudaSetDevice(context_.index), "cudaSetDevice");
    if (nbytes < kStagingThreshold) {
      check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyHostToDevice, context_.stream),
            "cudaMemcpyAsync");
      return;
    }
    std::lock_guard lock(staging_mutex_);
    check(cudaEventRecord(allocated_, context_.stream), "cudaEventRecord");
    check(cudaStreamWaitEvent(copy_stream_, allocated_, 0), "cudaStreamWaitEvent");
    for (std::size_t done = 0; done < nbytes;) {
      Staging& staging = staging_[next_staging_];
      next_staging_ = (next_staging_ + 1) % staging_.size();
      check(cudaEventSynchronize(staging.copied), "cudaEventSynchronize");  // buffer free again
      const std::size_t chunk = std::min(kStagingBufferBytes, nbytes - done);
      std::memcpy(staging.host, static_cast<const char*>(src) + done, chunk);
      check(cudaMemcpyAsync(static_cast<char*>(dst) + done, staging.host, chunk,
                            cudaMemcpyHostToDevice, copy_stream_),
            "cudaMemcpyAsync");
      check(cudaEventRecord(staging.copied, copy_stream_), "cudaEventRecord");
      done += chunk;
    }
    check(cudaEventRecord(allocated_, copy_stream_), "cudaEventRecord");
    check(cudaStreamWaitEvent(context_.stream, allocated_, 0), "cudaStreamWaitEvent");
  }

  void copy_to_host(void* dst, const void* src, std::size_t nbytes) {
    check(cudaSetDevice(context_.index), "cudaSetDevice");
    check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost, context_.stream),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(context_.stream), "cudaStreamSynchronize");
    inspect_recordings();
  }

  void copy_within(void* dst, const void* src, std::size_t nbytes) {
    check(cudaSetDevice(context_.index), "cudaSetDevice");
    check(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, context_.stream),
          "cudaMemcpyAsync");
  }

  void synchronize() {
    check(cudaSetDevice(context_.index), "cudaSetDevice");
    check(cudaStreamSynchronize(context_.stream), "cudaStreamSynchronize");
    inspect_recordings();
  }

  // Gives what the pools hold unused back to the driver, once the stream's work is done: the
  // stream-ordered pool keeps everything freed (see start), and the memory of recorded graphs is
  // a pool of its own, so one may be short where the other holds plenty. Called before a second
  // try of an allocation or a graph launch the GPU refused for memory.
  void release_cached_memory() {
    cudaStreamSynchronize(context_.stream);
    cudaMemPool_t pool = nullptr;
    if (cudaDeviceGetDefaultMemPool(&pool, context_.index) == cudaSuccess)
      cudaMemPoolTrimTo(pool, 0);
    cudaDeviceGraphMemTrim(context_.index);
    cudaGetLastError();  // a failure here leaves the second try to report
  }

  // The recorded graphs of this GPU, whose checks a synchronisation reads (the loss read once per
  // progress refresh is one).
  void add_recording(CudaRecordedWork* recording) {
    std::lock_guard lock(recordings_mutex_);
    recordings_.push_back(recording);
  }
  void remove_recording(CudaRecordedWork* recording) {
    std::lock_guard lock(recordings_mutex_);
    std::erase(recordings_, recording);
  }
  void inspect_recordings();

 private:
  struct Staging {
    void* host = nullptr;
    cudaEvent_t copied = nullptr;
  };
  DeviceContext context_;
  MemoryLedger ledger_;
  cudaStream_t copy_stream_ = nullptr;
  std::mutex recordings_mutex_;
  std::vector<CudaRecordedWork*> recordings_;
  std::mutex staging_mutex_;
  std::vector<Staging> staging_;
  std::size_t next_staging_ = 0;
  cudaEvent_t allocated_ = nullptr;
};

// A compiled step's kernels as one CUDA graph. Each replay launches it and records an event. The
// host runs at most two replays ahead of the GPU (a replay waits for the one before the last), so
// the GPU has the next replay queued while the host prepares the one after, and step times
// measured on the host stay the GPU's. The label and index checks keep the smallest bad position
// in pinned slots, read before each replay and at synchronisations; a bad one throws once the
// replays in flight have finished.
class CudaRecordedWork final : public RecordedWork {
 public:
  CudaRecordedWork(Gpu& gpu, cudaGraphExec_t graph, std::vector<RecordedCheck> checks)
      : gpu_(gpu), graph_(graph), checks_(std::move(checks)) {
    for (cudaEvent_t& event : done_)
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    gpu_.add_recording(this);
  }
  ~CudaRecordedWork() override {
    gpu_.remove_recording(this);
    cudaSetDevice(gpu_.context().index);
    for (cudaEvent_t event : done_) {
      cudaEventSynchronize(event);  // a replay in flight still writes the check slots
      cudaEventDestroy(event);
    }
    cudaGraphExecDestroy(graph_);
    for (const RecordedCheck& recorded : checks_)
      gpu_.context().free_recorded_slots.push_back(recorded.slot);
  }
  CudaRecordedWork(const CudaRecordedWork&) = delete;
  CudaRecordedWork& operator=(const CudaRecordedWork&) = delete;

  void replay() override {
    DeviceContext& context = gpu_.context();
    check(cudaSetDevice(context.index), "cudaSetDevice");
    cudaEvent_t& done = done_[launches_ % done_.size()];
    if (launches_ >= done_.size()) check(cudaEventSynchronize(done), "cudaEventSynchronize");
    if (bad_position_seen()) {
      check(cudaEventSynchronize(latest()), "cudaEventSynchronize");
      inspect();
    }
    cudaError_t launched = cudaGraphLaunch(graph_, context.stream);
    if (launched == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      gpu_.release_cached_memory();
      launched = cudaGraphLaunch(graph_, context.stream);
    }
    check(launched, "cudaGraphLaunch (a compiled step recorded as one CUDA graph)");
    check(cudaEventRecord(done, context.stream), "cudaEventRecord");
    ++launches_;
  }

  // Throws InvalidArgument for the smallest bad position the replays found (and clears it) once
  // they have all finished; does nothing before that.
  void inspect() {
    if (launches_ == 0) return;
    if (cudaEventQuery(latest()) != cudaSuccess) {
      cudaGetLastError();  // cudaErrorNotReady is no error here
      return;
    }
    unsigned long long* slots = gpu_.context().recorded_slots;
    for (const RecordedCheck& recorded : checks_) {
      const unsigned long long position = slots[recorded.slot];
      if (position == ~0ull) continue;
      for (const RecordedCheck& other : checks_)
        slots[other.slot] = ~0ull;
      throw InvalidArgument(recorded.message(static_cast<std::int64_t>(position)));
    }
  }

 private:
  cudaEvent_t latest() const { return done_[(launches_ + done_.size() - 1) % done_.size()]; }
  bool bad_position_seen() const {
    const unsigned long long* slots = gpu_.context().recorded_slots;
    return std::ranges::any_of(
        checks_, [&](const RecordedCheck& recorded) { return slots[recorded.slot] != ~0ull; });
  }

  Gpu& gpu_;
  cudaGraphExec_t graph_ = nullptr;
  std::array<cudaEvent_t, 2> done_{};
  std::vector<RecordedCheck> checks_;
  std::size_t launches_ = 0;
};

void Gpu::inspect_recordings() {
  std::vector<CudaRecordedWork*> recordings;
  {
    std::lock_guard lock(recordings_mutex_);
    recordings = recordings_;
  }
  for (CudaRecordedWork* recording : recordings)
    recording->inspect();
}

class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(std::deque<Gpu>& gpus) : gpus_(gpus) {}

  void* allocate(std::size_t nbytes) override { return gpu(0).allocate(nbytes); }
  void deallocate(void* data, std::size_t nbytes) override { gpu(0).deallocate(data, nbytes); }
  Allocator& allocator_for(int index) override { return gpu(index); }
  MemoryLedger& ledger(int index) override { return gpu(index).ledger(); }

  void copy_from_host(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) gpu(owner(dst)).copy_from_host(dst, src, nbytes);
  }
  void copy_to_host(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) gpu(owner(src)).copy_to_host(dst, src, nbytes);
  }
  void copy_within(void* dst, const void* src, std::size_t nbytes) override {
    if (nbytes) gpu(owner(dst)).copy_within(dst, src, nbytes);
  }

  Gpu& gpu(int index) {
    if (index < 0 || index >= static_cast<int>(gpus_.size())) {
      throw InvalidArgument("cuda:" + std::to_string(index) + " does not exist: this machine has " +
                            std::to_string(gpus_.size()) + " GPU" + (gpus_.size() == 1 ? "" : "s") +
                            " (cuda:0 to cuda:" + std::to_string(gpus_.size() - 1) + ")");
    }
    return gpus_[static_cast<std::size_t>(index)];
  }

 private:
  // The GPU a pointer from the pools belongs to (unified addressing knows).
  static int owner(const void* pointer) {
    cudaPointerAttributes attributes{};
    check(cudaPointerGetAttributes(&attributes, pointer), "cudaPointerGetAttributes");
    return attributes.device;
  }

  std::deque<Gpu>& gpus_;
};

class CudaBackend final : public TableBackend {
 public:
  explicit CudaBackend(CudaMemory& memory) : TableBackend(kernels()), memory_(memory) {}
  DeviceType device_type() const override { return DeviceType::cuda; }
  const char* name() const override { return "cuda"; }
  void run(const KernelContext& context) override {
    TableBackend::run(context);
    // Launch errors (bad configurations) show up at once; faults inside kernels at the next
    // synchronisation, named by the call that synchronised.
    check(cudaGetLastError(), op_name(context.kind));
  }
  void synchronize() override {
    int count = 0;
    check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    for (int index = 0; index < count; ++index)
      memory_.gpu(index).synchronize();
  }
  std::unique_ptr<KernelTimer> make_kernel_timer(Device device) override {
    return make_event_timer(device);
  }
  bool records_kernels() const override { return step_graphs_enabled(); }
  // Stream capture on this thread only (cudaStreamCaptureModeThreadLocal), so another thread's
  // CUDA calls neither join the graph nor fail it. The pool's allocations inside become the
  // graph's own memory (freed where the step freed them, or at the next launch).
  std::unique_ptr<RecordedWork> record(Device device, const std::function<void()>& issue,
                                       std::string& why_not) override {
    Gpu& gpu = memory_.gpu(device.index);
    DeviceContext& context = enter(device);
    std::vector<RecordedCheck> checks;
    check(cudaStreamBeginCapture(context.stream, cudaStreamCaptureModeThreadLocal),
          "cudaStreamBeginCapture");
    context.recording_checks = &checks;
    std::string failure;
    try {
      issue();
    } catch (const std::exception& error) {
      failure = error.what();
    }
    context.recording_checks = nullptr;
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(context.stream, &graph);
    if (failure.empty() && ended != cudaSuccess) {
      failure = std::string("cudaStreamEndCapture failed: ") + cudaGetErrorString(ended);
    }
    cudaGraphExec_t exec = nullptr;
    if (failure.empty()) {
      const cudaError_t made =
          cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch);
      if (made != cudaSuccess) {
        failure = std::string("cudaGraphInstantiate failed: ") + cudaGetErrorString(made);
      }
    }
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (!failure.empty()) {
      cudaGetLastError();  // the capture's errors are not the next kernel's
      for (const RecordedCheck& recorded : checks)
        context.free_recorded_slots.push_back(recorded.slot);
      why_not = failure;
      return nullptr;
    }
    return std::make_unique<CudaRecordedWork>(gpu, exec, std::move(checks));
  }

 private:
  CudaMemory& memory_;
};

// Everything the backend owns, made once by the first bring-up.
struct Runtime {
  Status status;
  std::deque<Gpu> gpus;  // stable addresses: contexts are handed out by reference
  std::unique_ptr<CudaMemory> memory;
  std::unique_ptr<CudaBackend> backend;
};

std::string driver_problem(cudaError_t status) {
  switch (status) {
    case cudaErrorInsufficientDriver:
      return "no NVIDIA driver is loaded, or it is older than the CUDA " +
             std::to_string(CUDART_VERSION / 1000) + " runtime Tandem was built with";
    case cudaErrorNoDevice:
      return "the NVIDIA driver sees no GPU (check CUDA_VISIBLE_DEVICES)";
    default:
      return std::string("the CUDA runtime could not start: ") + cudaGetErrorName(status) + " (" +
             cudaGetErrorString(status) + ")";
  }
}

// Probes the driver and the GPUs, loads the libraries and sets every GPU up, filling `state`.
void bring_up(Runtime& state) {
  Status& status = state.status;
  status.built = true;
  status.runtime_version = CUDART_VERSION;
  cudaDriverGetVersion(&status.driver_version);
  int count = 0;
  const cudaError_t counted = cudaGetDeviceCount(&count);
  if (counted != cudaSuccess || count == 0) {
    cudaGetLastError();
    status.reason = driver_problem(counted != cudaSuccess ? counted : cudaErrorNoDevice);
    return;
  }
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties");
    status.devices.push_back({index, properties.name, properties.major, properties.minor,
                              properties.totalGlobalMem, properties.multiProcessorCount});
  }
  for (const DeviceProperties& device : status.devices) {
    if (device.major < 8) {
      status.reason = "cuda:" + std::to_string(device.index) + " (" + device.name +
                      ") has compute capability " + std::to_string(device.major) + "." +
                      std::to_string(device.minor) +
                      "; this build of Tandem targets 8.0 (A100) and newer";
      return;
    }
  }
  if (const std::string missing = load_libraries(); !missing.empty()) {
    status.reason = missing;
    return;
  }
  status.cudnn_version = static_cast<int>(cudnn().cudnnGetVersion());
  status.cublaslt_version = static_cast<int>(cublaslt().cublasLtGetVersion());
  for (const DeviceProperties& device : status.devices) {
    state.gpus.emplace_back(device.index);
    state.gpus.back().start(device.total_memory, device.multiprocessors);
  }
  state.memory = std::make_unique<CudaMemory>(state.gpus);
  state.backend = std::make_unique<CudaBackend>(*state.memory);
  status.available = true;
}

Runtime& runtime() {
  // Never destroyed: tensors released during static destruction still return memory to their
  // pools, and the driver tears the streams down with the process.
  static Runtime* const state = new Runtime();
  static std::once_flag once;
  std::call_once(once, [] {
    try {
      bring_up(*state);
    } catch (const Error& error) {
      state->status.reason = std::string("the GPU could not be set up: ") + error.what();
      state->status.available = false;
    }
  });
  return *state;
}

}  // namespace

DeviceContext& enter(Device device) {
  Runtime& state = runtime();
  TANDEM_ASSERT(state.memory, "CUDA kernel run before the backend came up");
  Gpu& gpu = state.memory->gpu(device.index);
  check(cudaSetDevice(device.index), "cudaSetDevice");
  return gpu.context();
}

DeviceContext& enter(const KernelContext& context) {
  const Device device =
      !context.outputs.empty() ? context.outputs[0].device() : context.inputs[0].device();
  return enter(device);
}

BadValueCheck::BadValueCheck(DeviceContext& context) : context_(context) {
  check(cudaMemsetAsync(context_.bad_position, 0xFF, sizeof(unsigned long long), context_.stream),
        "cudaMemsetAsync");
}

std::int64_t BadValueCheck::first(
    std::function<std::string(std::int64_t position)> recorded_message) {
  if (context_.recording_checks != nullptr) {
    if (context_.free_recorded_slots.empty()) {
      throw Error("the recorded steps of cuda:" + std::to_string(context_.index) + " hold " +
                  std::to_string(kRecordedCheckSlots) +
                  " label and index checks already; this step runs without a CUDA graph");
    }
    const int slot = context_.free_recorded_slots.back();
    context_.free_recorded_slots.pop_back();
    context_.recording_checks->push_back({slot, std::move(recorded_message)});
    context_.recorded_slots[slot] = ~0ull;
    keep_bad_position(context_, context_.recorded_slots_on_device + slot);
    return -1;
  }
  check(cudaMemcpyAsync(context_.bad_position_host, context_.bad_position,
                        sizeof(unsigned long long), cudaMemcpyDeviceToHost, context_.stream),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(context_.stream), "cudaStreamSynchronize");
  const unsigned long long position = *context_.bad_position_host;
  return position == ~0ull ? -1 : static_cast<std::int64_t>(position);
}

const Status& status() {
  return runtime().status;
}

bool is_available() {
  return status().available;
}

void set_tf32_enabled(bool enabled) {
  tf32 = enabled;
}
bool tf32_enabled() {
  return tf32;
}

void set_step_graphs_enabled(bool enabled) {
  step_graphs = enabled;
}
bool step_graphs_enabled() {
  return step_graphs;
}

}  // namespace cuda

namespace {

// The CUDA backend comes up on the first use of a cuda device, or says why it cannot.
const BackendRegistration registration(
    DeviceType::cuda,
    [](std::string& why_not) -> Backend* {
      cuda::Runtime& state = cuda::runtime();
      if (!state.status.available) {
        why_not = state.status.reason;
        return nullptr;
      }
      register_device_memory(DeviceType::cuda, state.memory.get());
      return state.backend.get();
    },
    [](OpKind kind) { return cuda::kernels().facts(kind); });

}  // namespace
}  // namespace tandem

// The linker keeps this file, and with it the registration, because CMake asks for this symbol.
extern "C" void tandem_link_cuda_backend() {}
