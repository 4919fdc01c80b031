#pragma once
// The small interface every backend implements, and the registry backends add themselves to. A
// backend owns the kernels of one device type; the op table owns everything else about an op.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/kernel_table.h"
#include "ops/op_table.h"

namespace tandem {

// What a kernel keeps for one node of a compiled step from one run to the next (on the CPU, the
// oneDNN primitive it looked up and memory objects on the node's buffers), so that a run skips
// the lookups an eager call makes. At batch 1 those cost 6 us of a 130 us convolution on the CPU,
// its caches cold after the filters streamed through. A kernel checks what it kept against the
// call (a buffer moved, a constant was replaced) and remakes what differs.
class KernelState {
 public:
  virtual ~KernelState() = default;
};

struct KernelContext {
  OpKind kind;
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;  // allocated (or aliased) by dispatch before the kernel runs
  const Attrs& attrs;
  // The node's slot in a compiled step, which its kernel may fill; nullptr for an eager call.
  std::unique_ptr<KernelState>* state = nullptr;
};

// The state kept in the call's slot as a T, made empty where the slot holds none or another
// kernel's; nullptr for an eager call.
template <typename T>
T* kept_state(const KernelContext& context) {
  if (context.state == nullptr) return nullptr;
  if (auto* kept = dynamic_cast<T*>(context.state->get())) return kept;
  *context.state = std::make_unique<T>();
  return static_cast<T*>(context.state->get());
}

// Times one op's kernels in the device's own queue, for the profiler: start() and stop() are
// called on the host around the op as it is issued; seconds() waits until the device has passed
// both marks and returns the time between them.
class KernelTimer {
 public:
  virtual ~KernelTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double seconds() = 0;
};

// Kernels recorded once and replayed as one unit (on CUDA, a CUDA graph: one launch for the
// whole step, no per-kernel host work). A replay runs them again on the same buffers.
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  virtual void replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType device_type() const = 0;
  virtual const char* name() const = 0;
  // What the backend knows of its kernel for `kind`, nullptr when it has none.
  virtual const KernelFacts* kernel_facts(OpKind kind) const = 0;
  // Whether run() has a kernel for this op with inputs of this dtype.
  bool supports(OpKind kind, DType dtype) const {
    const KernelFacts* facts = kernel_facts(kind);
    return facts != nullptr && (facts->dtypes >> static_cast<unsigned>(dtype)) & 1u;
  }
  virtual void run(const KernelContext& context) = 0;
  // Whether run()'s kernel for the fused op `kind` on inputs of these shapes and dtypes beats the
  // ops it stands for run one by one. A compiled step's fusion passes ask before forming a fused
  // op whose kernel only gains on some shapes (pooled_conv2d: where the convolution can be formed
  // a band of rows at a time) and elsewhere would run those ops with a temporary between them.
  virtual bool fused_kernel_gains(OpKind kind, std::span<const TensorMeta> inputs,
                                  const Attrs& attrs) const {
    return false;
  }
  // Waits until every kernel launched so far has finished.
  virtual void synchronize() = 0;
  // A timer for kernels on `device`, where run() returns before they finish (CUDA: events on
  // the GPU's stream); nullptr where run() returns with the work done, so that the host clock
  // around run() times it (the CPU).
  virtual std::unique_ptr<KernelTimer> make_kernel_timer(Device device) { return nullptr; }
  // Whether record() can record kernels here now (CUDA, with step graphs on). A compiled step
  // asks before it moves its inputs into buffers of its own, which recording needs.
  virtual bool records_kernels() const { return false; }
  // Records the kernels `issue` launches on `device` without running them, for replay(), or
  // returns nullptr with why in `why_not` (a kernel did what a recording cannot hold, such as a
  // host synchronisation). Nothing `issue` launches runs until the first replay().
  virtual std::unique_ptr<RecordedWork> record(Device device, const std::function<void()>& issue,
                                               std::string& why_not) {
    why_not = std::string(name()) + " runs kernels as they are issued";
    return nullptr;
  }
};

using KernelFn = void (*)(const KernelContext& context);
using FunctionKernelTable = KernelTable<KernelFn>;

// A backend whose kernels are plain functions in a KernelTable (the CPU and CUDA backends).
class TableBackend : public Backend {
 public:
  explicit TableBackend(const FunctionKernelTable& kernels) : kernels_(kernels) {}
  const KernelFacts* kernel_facts(OpKind kind) const override { return kernels_.facts(kind); }
  void run(const KernelContext& context) override { kernels_.kernel(context.kind)(context); }

 private:
  const FunctionKernelTable& kernels_;
};

// ---- the backend registry ----
// Each backend registers itself with a static BackendRegistration in its own files, so the ops
// layer names no backend and a new one is added without touching it. Nothing else refers to a
// registration, so a static library would drop it: each backend's file defines an anchor,
// `extern "C" void tandem_link_<name>_backend()`, and CMake asks the linker for it
// (--undefined) wherever the library is linked (TANDEM_BACKEND_ANCHORS in CMakeLists.txt).
//
// `bring_up` runs once, on the first use of the device type (a tensor placed there, an op
// dispatched there): it registers the type's DeviceMemory (register_device_memory) and returns
// the backend, or returns nullptr with why the type cannot run here in `why_not` ("no NVIDIA
// driver is loaded ..."), which every later use repeats. `kernel_facts` answers what the
// backend's kernels are without bringing a device up, so deterministic mode can refuse a
// kernel, and tools can list kernels, on a machine without that device.
using BackendBringUp = Backend* (*)(std::string& why_not);
using KernelFactsFn = const KernelFacts* (*)(OpKind kind);

class BackendRegistration {
 public:
  BackendRegistration(DeviceType type, BackendBringUp bring_up, KernelFactsFn kernel_facts);
};

// The backend of `device`'s type, brought up on first use; throws Error naming the device and
// why when it has none here.
Backend& backend_for(Device device);
// The backends that are up or come up on this machine, the CPU first (the op harness checks
// each against the CPU).
std::vector<Backend*> available_backends();
// What the backend registered for `type` knows of its kernel for `kind`, without bringing a
// device up; nullptr when it has no such kernel or the build has no backend for `type`.
const KernelFacts* registered_kernel_facts(DeviceType type, OpKind kind);

// In deterministic mode (set_deterministic), throws Error naming the op and the fix when the
// backend's kernel for it on `device` could give other results from run to run (its
// KernelFacts say why); does nothing otherwise. call_op runs it before every kernel.
void require_deterministic_kernel(OpKind kind, Device device);

// Called around every op run; the profiler and the autodiff tape attach here, so the ops layer
// depends on neither.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void before_op(OpKind, std::span<const Tensor> inputs, const Attrs&) {}
  virtual void after_op(OpKind kind, std::span<const Tensor> inputs,
                        std::span<const Tensor> outputs, const Attrs& attrs) = 0;
  // False where the observer would ignore every op this thread runs now (the tape recorder with
  // no tape recording): a compiled step then replays its recorded kernels instead of issuing its
  // nodes one by one for the observer to see.
  virtual bool watches_this_thread() const { return true; }
};
void add_op_observer(OpObserver* observer);
void remove_op_observer(OpObserver* observer);
// For ops run outside call_op (the nodes of a compiled step): the observers registered now, to
// call around each kernel (empty, and so free, when nothing observes).
std::shared_ptr<const std::vector<OpObserver*>> current_op_observers();

}  // namespace tandem
