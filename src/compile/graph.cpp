#include "compile/graph.h"

namespace tandem::compile {

int Graph::root(int value) const {
  while (values[static_cast<std::size_t>(value)].alias_of >= 0)
    value = values[static_cast<std::size_t>(value)].alias_of;
  return value;
}

std::string describe_value(const Graph& graph, int value) {
  const Value& v = graph.values[static_cast<std::size_t>(value)];
  const std::string type = shape_str(v.meta.shape) + " " + dtype_name(v.meta.dtype);
  switch (v.kind) {
    case ValueKind::input:
      return "input " + type;
    case ValueKind::capture:
      return "capture " + type + (v.tensor.name().empty() ? "" : " '" + v.tensor.name() + "'");
    case ValueKind::constant:
      return "constant " + type;
    case ValueKind::host:
      return "host " + type + " (" + v.what + ")";
    case ValueKind::node:
      break;
  }
  return type;
}

std::string graph_listing(const Graph& graph) {
  std::string text;
  for (std::size_t i = 0; i < graph.values.size(); ++i) {
    if (graph.values[i].kind == ValueKind::node) continue;
    text += "  %" + std::to_string(i) + " = " + describe_value(graph, static_cast<int>(i)) + "\n";
  }
  for (const Node& node : graph.nodes) {
    text += "  ";
    for (std::size_t k = 0; k < node.outputs.size(); ++k)
      text += (k ? ", %" : "%") + std::to_string(node.outputs[k]);
    text += " = " + (node.label.empty() ? std::string(op_name(node.kind)) : node.label) + "(";
    for (std::size_t k = 0; k < node.inputs.size(); ++k)
      text += (k ? ", %" : "%") + std::to_string(node.inputs[k]);
    text += ")";
    if (!node.attrs.entries().empty()) text += " " + node.attrs.str();
    text += " ->";
    for (int output : node.outputs) {
      const Value& v = graph.values[static_cast<std::size_t>(output)];
      text += " " + shape_str(v.meta.shape) + " " + dtype_name(v.meta.dtype);
      if (v.alias_of >= 0) text += " (in %" + std::to_string(graph.root(output)) + ")";
    }
    text += "\n";
  }
  text += "  return";
  for (std::size_t k = 0; k < graph.outputs.size(); ++k)
    text += (k ? ", %" : " %") + std::to_string(graph.outputs[k]);
  return text + "\n";
}

}  // namespace tandem::compile
