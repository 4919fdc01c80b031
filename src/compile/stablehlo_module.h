#pragma once
// A graph as one StableHLO module, written with each op's lowering rule (ops/stablehlo.h).
#include <string>
#include <vector>

#include "compile/graph.h"

namespace tandem::compile {

struct LoweredGraph {
  std::string module;          // MLIR text: func.func @main
  std::vector<int> arguments;  // the value of each argument of @main, in order
  // The arguments a node writes in place (an optimizer update), as indices into `arguments`:
  // their final versions are @main's results after the graph's outputs, in this order, each
  // aliasing its argument (tf.aliasing_output), so XLA updates the donated buffer in place.
  std::vector<std::size_t> updated;
};

// @main's arguments are the graph's inputs, then its captures and constants (in value order),
// then its host operands (in the order their fills run); its results are the graph's outputs,
// then the updated arguments. Throws InvalidArgument naming the first op without a lowering
// rule, or a view read after the buffer under it was written (which SSA cannot express).
LoweredGraph lower_graph(const Graph& graph);

}  // namespace tandem::compile
