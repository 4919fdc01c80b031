#include "compile/tracer.h"

namespace tandem::compile {

Tracer::Tracer(std::string name, int replicas) {
  graph_.name = std::move(name);
  graph_.replicas = replicas;
}

int Tracer::add_value(Value value, const Tensor& tensor) {
  const int id = static_cast<int>(graph_.values.size());
  graph_.values.push_back(std::move(value));
  value_by_tensor_[tensor.id()] = id;
  return id;
}

void Tracer::require_device(Device device, const std::string& use) {
  if (!has_device_) {
    graph_.device = device;
    has_device_ = true;
  } else if (device != graph_.device) {
    throw InvalidArgument("traced step '" + graph_.name + "': " + use + " runs on " + device.str() +
                          " but the step began on " + graph_.device.str() +
                          "; a compiled step runs on one device: move the data before the step, "
                          "or run it eagerly (--jit off)");
  }
}

Tensor Tracer::add_input(const Tensor& example) {
  const int index = static_cast<int>(graph_.inputs.size());
  const std::string origin =
      "input " + std::to_string(index) + " of traced step '" + graph_.name + "'";
  require_device(example.device(), origin);
  Tensor symbolic = Tensor::symbolic(example.shape(), example.dtype(), example.device(), origin);
  Value value;
  value.kind = ValueKind::input;
  value.meta = TensorMeta{example.shape(), example.dtype()};
  value.device = example.device();
  graph_.inputs.push_back(add_value(std::move(value), symbolic));
  return symbolic;
}

int Tracer::value_of(const Tensor& tensor, const std::string& use) {
  if (const auto found = value_by_tensor_.find(tensor.id()); found != value_by_tensor_.end()) {
    return found->second;
  }
  if (tensor.is_symbolic()) {
    throw InvalidArgument("traced step '" + graph_.name + "': " + use +
                          " is a symbolic tensor of another trace (kept from an earlier traced "
                          "call?); pass values into the step as its inputs instead");
  }
  // A tensor from outside the trace: a weight, a slot, a constant made during the trace. Read
  // by reference, so updates made in place and set_data() between runs are seen.
  Value value;
  value.kind = ValueKind::capture;
  value.meta = TensorMeta{tensor.shape(), tensor.dtype()};
  value.device = tensor.device();
  value.tensor = tensor;
  return add_value(std::move(value), tensor);
}

std::vector<Tensor> Tracer::record_op(OpKind kind, const std::vector<Tensor>& inputs,
                                      const Attrs& attrs, const std::vector<TensorMeta>& outputs,
                                      Device device) {
  const OpDef& def = op_def(kind);
  const int node_index = static_cast<int>(graph_.nodes.size());
  const std::string where = std::string(def.name) + " (node " + std::to_string(node_index) + ")";
  require_device(device, where);
  Node node;
  node.kind = kind;
  node.attrs = attrs;
  node.phase = current_phase();
  for (std::size_t i = 0; i < inputs.size(); ++i)
    node.inputs.push_back(value_of(inputs[i], "input " + std::to_string(i) + " of " + where));
  std::vector<Tensor> symbolic;
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    Value value;
    value.meta = outputs[i];
    value.device = device;
    value.node = node_index;
    const int alias = i < def.output_aliases.size() ? def.output_aliases[i] : -1;
    if (alias >= 0) value.alias_of = node.inputs[static_cast<std::size_t>(alias)];
    Tensor tensor = Tensor::symbolic(
        outputs[i].shape, outputs[i].dtype, device,
        "output " + std::to_string(i) + " of " + where + " in traced step '" + graph_.name + "'");
    node.outputs.push_back(add_value(std::move(value), tensor));
    symbolic.push_back(std::move(tensor));
  }
  graph_.nodes.push_back(std::move(node));
  return symbolic;
}

Tensor Tracer::record_host_operand(const char* what, const TensorMeta& meta, Device device,
                                   HostFill fill) {
  require_device(device, what);
  Tensor tensor = Tensor::symbolic(meta.shape, meta.dtype, device,
                                   std::string(what) + " (a host operand of traced step '" +
                                       graph_.name + "', known only when it runs)");
  Value value;
  value.kind = ValueKind::host;
  value.meta = meta;
  value.device = device;
  value.what = what;
  value.fill = std::move(fill);
  graph_.host_operands.push_back(add_value(std::move(value), tensor));
  return tensor;
}

Graph Tracer::finish(const std::vector<Tensor>& outputs) {
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) {
      throw InvalidArgument("traced step '" + graph_.name + "' returned an undefined tensor as " +
                            "output " + std::to_string(i) + "; return only defined tensors");
    }
    graph_.outputs.push_back(value_of(outputs[i], "output " + std::to_string(i)));
  }
  value_by_tensor_.clear();
  return std::move(graph_);
}

}  // namespace tandem::compile
