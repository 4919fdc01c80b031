// The module around the ops' lowerings: @main's signature from the graph's inputs, captures and
// constants, one rule call per node in execution order, and the return of the graph's outputs.
#include "compile/stablehlo_module.h"

#include <cctype>

#include "ops/stablehlo.h"

namespace tandem::compile {
namespace {

// An MLIR symbol from the step's name: letters, digits and underscores.
std::string symbol_of(const std::string& name) {
  std::string symbol;
  for (const char c : name)
    symbol += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return symbol.empty() || std::isdigit(static_cast<unsigned char>(symbol.front()))
             ? "step_" + symbol
             : symbol;
}

}  // namespace

LoweredGraph lower_graph(const Graph& graph) {
  LoweredGraph lowered;
  lowered.arguments = graph.inputs;
  for (std::size_t id = 0; id < graph.values.size(); ++id) {
    const Value& value = graph.values[id];
    if (value.kind == ValueKind::capture || value.kind == ValueKind::constant) {
      lowered.arguments.push_back(static_cast<int>(id));
    }
    if (value.kind == ValueKind::host) {
      throw InvalidArgument("lowering '" + graph.name + "' to StableHLO: the host operand '" +
                            value.what + "' is not lowered yet; run this step without XLA");
    }
  }
  std::vector<StablehloValue> values(graph.values.size());
  std::string signature;
  for (std::size_t i = 0; i < lowered.arguments.size(); ++i) {
    const Value& value = graph.values[static_cast<std::size_t>(lowered.arguments[i])];
    StablehloValue& argument = values[static_cast<std::size_t>(lowered.arguments[i])];
    argument = {"%arg" + std::to_string(i), value.meta.shape, value.meta.dtype};
    signature += (i ? ", " : "") + argument.name + ": " + StablehloEmitter::type(argument);
  }
  StablehloEmitter emitter;
  for (const Node& node : graph.nodes) {
    const OpDef& def = op_def(node.kind);
    if (def.lower == nullptr) {
      throw InvalidArgument("lowering '" + graph.name + "' to StableHLO: op " + def.name +
                            " has no lowering rule yet; run this step without XLA");
    }
    std::vector<StablehloValue> inputs;
    for (const int input : node.inputs)
      inputs.push_back(values[static_cast<std::size_t>(input)]);
    std::vector<TensorMeta> outputs;
    for (const int output : node.outputs)
      outputs.push_back(graph.values[static_cast<std::size_t>(output)].meta);
    const std::vector<StablehloValue> results = def.lower(emitter, inputs, outputs, node.attrs);
    TANDEM_ASSERT(results.size() == node.outputs.size(), "a lowering returned another count");
    for (std::size_t i = 0; i < results.size(); ++i)
      values[static_cast<std::size_t>(node.outputs[i])] = results[i];
  }
  std::string names;
  std::string types;
  for (const int output : graph.outputs) {
    const StablehloValue& value = values[static_cast<std::size_t>(output)];
    names += (names.empty() ? "" : ", ") + value.name;
    types += (types.empty() ? "" : ", ") + StablehloEmitter::type(value);
  }
  lowered.module = "module @" + symbol_of(graph.name) +
                   " attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {\n"
                   "  func.func public @main(" +
                   signature + ") -> (" + types + ") {\n" + emitter.body() + "    return " + names +
                   " : " + types + "\n  }\n}\n";
  return lowered;
}

}  // namespace tandem::compile
