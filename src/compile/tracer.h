#pragma once
// Records a step into a Graph: the TraceRecorder that call_op and host_operand hand their work
// to while a step is traced.
#include <unordered_map>

#include "compile/graph.h"
#include "ops/trace_hook.h"

namespace tandem::compile {

class Tracer : public TraceRecorder {
 public:
  explicit Tracer(std::string name, int replicas = 1);
  int replicas() const override { return graph_.replicas; }

  // A symbolic argument of the step shaped like `example`.
  Tensor add_input(const Tensor& example);
  std::vector<Tensor> record_op(OpKind kind, const std::vector<Tensor>& inputs, const Attrs& attrs,
                                const std::vector<TensorMeta>& outputs, Device device) override;
  Tensor record_host_operand(const char* what, const TensorMeta& meta, Device device,
                             HostFill fill) override;
  // The graph returning `outputs`; the tracer is spent after.
  Graph finish(const std::vector<Tensor>& outputs);

 private:
  // The value of a tensor met in the trace: a symbolic one of this trace, or a tensor from
  // outside it, captured on first use. `use` says where, for errors.
  int value_of(const Tensor& tensor, const std::string& use);
  int add_value(Value value, const Tensor& tensor);
  void require_device(Device device, const std::string& use);

  Graph graph_;
  bool has_device_ = false;
  std::unordered_map<std::uint64_t, int> value_by_tensor_;  // Tensor::id() -> value id
};

}  // namespace tandem::compile
