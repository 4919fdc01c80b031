#pragma once
// The small interface every backend implements. A backend owns the kernels of one device type;
// the op table owns everything else about an op.
#include <memory>
#include <span>

#include "ops/op_table.h"

namespace tandem {

struct KernelContext {
  OpKind kind;
  std::span<const Tensor> inputs;
  std::span<Tensor> outputs;  // allocated (or aliased) by dispatch before the kernel runs
  const Attrs& attrs;
};

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

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType device_type() const = 0;
  virtual const char* name() const = 0;
  // Whether run() has a kernel for this op with inputs of this dtype.
  virtual bool supports(OpKind kind, DType dtype) const = 0;
  virtual void run(const KernelContext& context) = 0;
  // Waits until every kernel launched so far has finished.
  virtual void synchronize() = 0;
  // A timer for kernels on `device`, where run() returns before they finish (CUDA: events on
  // the GPU's stream); nullptr where run() returns with the work done, so that the host clock
  // around run() times it (the CPU).
  virtual std::unique_ptr<KernelTimer> make_kernel_timer(Device device) { return nullptr; }
};

Backend& backend_for(Device device);
// In deterministic mode (set_deterministic), throws Error naming the op and the fix when its
// kernel on `device` could give other results from run to run (sums with atomics, or cuDNN
// algorithms chosen by speed); does nothing otherwise. call_op runs it before every kernel.
void require_deterministic_kernel(OpKind kind, Device device);
void register_backend(DeviceType type, Backend* backend);
// Defined by src/backend/cpu; always present.
Backend& cpu_backend();

// Called around every op run; the profiler and the autodiff tape attach here, so the ops layer
// depends on neither.
class OpObserver {
 public:
  virtual ~OpObserver() = default;
  virtual void before_op(OpKind, std::span<const Tensor> inputs, const Attrs&) {}
  virtual void after_op(OpKind kind, std::span<const Tensor> inputs,
                        std::span<const Tensor> outputs, const Attrs& attrs) = 0;
};
void add_op_observer(OpObserver* observer);
void remove_op_observer(OpObserver* observer);

}  // namespace tandem
