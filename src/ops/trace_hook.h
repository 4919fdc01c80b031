#pragma once
// The seam through which a step is traced (the compile layer's Tracer): while a recorder is
// active on a thread, call_op checks and infers as always but records the op instead of running
// its kernel, and host_operand registers its fill instead of running it. The ops layer names no
// tracer, as it names no backend.
#include <vector>

#include "ops/op_table.h"

namespace tandem {

class TraceRecorder {
 public:
  virtual ~TraceRecorder() = default;
  // The op's outputs as symbolic tensors (Tensor::symbolic) of `outputs`' shapes and dtypes;
  // the inputs have passed call_op's checks.
  virtual std::vector<Tensor> record_op(OpKind kind, const std::vector<Tensor>& inputs,
                                        const Attrs& attrs, const std::vector<TensorMeta>& outputs,
                                        Device device) = 0;
  // A value the host computes anew before every run of the graph (see host_operand).
  virtual Tensor record_host_operand(const char* what, const TensorMeta& meta, Device device,
                                     HostFill fill) = 0;
  // The replicas the traced step runs as (an XLA strategy's data-parallel program): the step
  // sees one replica's share of the batch, and what it draws for the whole batch (dropout's
  // random words) is as many shares.
  virtual int replicas() const { return 1; }
};

// The recorder tracing on this thread, nullptr when none.
TraceRecorder* active_trace_recorder();

// Makes `recorder` this thread's recorder while alive (nesting restores the outer one).
class TraceRecorderScope {
 public:
  explicit TraceRecorderScope(TraceRecorder* recorder);
  ~TraceRecorderScope();
  TraceRecorderScope(const TraceRecorderScope&) = delete;
  TraceRecorderScope& operator=(const TraceRecorderScope&) = delete;

 private:
  TraceRecorder* outer_;
};

}  // namespace tandem
