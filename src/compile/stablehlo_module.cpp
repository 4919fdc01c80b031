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
    const ValueKind kind = graph.values[id].kind;
    if (kind == ValueKind::capture || kind == ValueKind::constant) {
      lowered.arguments.push_back(static_cast<int>(id));
    }
  }
  lowered.arguments.insert(lowered.arguments.end(), graph.host_operands.begin(),
                           graph.host_operands.end());
  // The graph writes buffers in place; SSA has versions instead. `latest` is a buffer's current
  // version (by its root value); a view stays valid only while its root has the version it was
  // made from.
  std::vector<StablehloValue> values(graph.values.size());
  std::vector<StablehloValue> latest(graph.values.size());
  std::vector<int> writes(graph.values.size(), 0);         // per root
  std::vector<int> made_at_write(graph.values.size(), 0);  // per view
  for (std::size_t i = 0; i < lowered.arguments.size(); ++i) {
    const auto id = static_cast<std::size_t>(lowered.arguments[i]);
    const Value& value = graph.values[id];
    values[id] = latest[id] = stablehlo_argument(i, value.meta.shape, value.meta.dtype);
  }
  const auto read = [&](int value, const std::string& use) -> const StablehloValue& {
    const auto id = static_cast<std::size_t>(value);
    const auto root = static_cast<std::size_t>(graph.root(value));
    if (root == id) return latest[id];
    if (made_at_write[id] != writes[root]) {
      throw InvalidArgument("lowering '" + graph.name + "' to StableHLO: " + use + " reads " +
                            describe_value(graph, value) +
                            ", a view of a buffer written after the view was made; run this "
                            "step without XLA");
    }
    return values[id];
  };
  StablehloEmitter emitter;
  for (std::size_t n = 0; n < graph.nodes.size(); ++n) {
    const Node& node = graph.nodes[n];
    const OpDef& def = op_def(node.kind);
    if (def.lower == nullptr) {
      throw InvalidArgument("lowering '" + graph.name + "' to StableHLO: op " + def.name +
                            " has no lowering rule yet; run this step without XLA");
    }
    const std::string use = std::string(def.name) + " (node " + std::to_string(n) + ")";
    std::vector<StablehloValue> inputs;
    for (const int input : node.inputs)
      inputs.push_back(read(input, use));
    std::vector<TensorMeta> outputs;
    for (const int output : node.outputs)
      outputs.push_back(graph.values[static_cast<std::size_t>(output)].meta);
    const std::vector<StablehloValue> results = def.lower(emitter, inputs, outputs, node.attrs);
    TANDEM_ASSERT(results.size() == node.outputs.size(), "a lowering returned another count");
    for (std::size_t i = 0; i < results.size(); ++i) {
      const auto output = static_cast<std::size_t>(node.outputs[i]);
      values[output] = latest[output] = results[i];
      const auto root = static_cast<std::size_t>(graph.root(node.outputs[i]));
      if (graph.writes(node) && root != output) {
        latest[root] = results[i];
        ++writes[root];
      }
      made_at_write[output] = writes[root];
    }
  }
  std::vector<StablehloValue> returned;
  for (const int output : graph.outputs)
    returned.push_back(read(output, "the step's output"));
  std::vector<StablehloArgument> arguments;
  for (std::size_t i = 0; i < lowered.arguments.size(); ++i) {
    const auto id = static_cast<std::size_t>(lowered.arguments[i]);
    arguments.push_back({values[id]});
    if (writes[id] > 0) {
      arguments.back().aliased_result = static_cast<int>(returned.size());
      lowered.updated.push_back(i);
      returned.push_back(latest[id]);
    }
  }
  lowered.module =
      stablehlo_module(symbol_of(graph.name), graph.replicas, arguments, emitter, returned);
  return lowered;
}

}  // namespace tandem::compile
